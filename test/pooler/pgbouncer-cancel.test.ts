// Cancels through pgbouncer in transaction pooling, one server connection in the pool (docs/reliability.md).
// Ctrl-C during `backfill`: its statement, blocked on a lock this test holds, is cancelled through the
// pooler (its server session is not the CLI's to cancel or terminate by pid, and a second connection
// through the pooler would wait behind that very statement), nothing is written, the CLI says what state
// the database is in and exits 130, and kandev's next transaction through the pooler runs. A scrape
// abandoned while the exporter's query waits: the query is cancelled, and pgbouncer goes on serving.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, exporterUrl, startCli } from '../helpers/cli.js';
import { PGBOUNCER, startPgbouncer, type Pgbouncer } from '../helpers/pgbouncer.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

if (!PGBOUNCER) console.warn('pgbouncer-cancel.test.ts skipped: pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)');

const db = await freshDatabase('pgbouncer_cancel', { from: 'host' });
const cli = builtCli();
const children: ChildProcess[] = [];
let bouncer: Pgbouncer;

/** What a kandev client through the pooler gets: an answer, with PostgreSQL's defaults. */
async function kandevAnswers() {
  const kandev = new pg.Client(bouncer.url);
  await kandev.connect();
  try {
    const { rows: [s] } = await kandev.query(`SELECT current_setting('statement_timeout') AS t, current_setting('search_path') AS p`);
    return s;
  } finally {
    await kandev.end();
  }
}

describe.skipIf(!PGBOUNCER)('cancels through pgbouncer', () => {
  beforeAll(async () => {
    const t = await createTurn(db.pool, 'public', 'hist');
    for (let i = 0; i < 3; i++) {
      await insertMessage(db.pool, 'public', { id: `m${i}`, session: t.session, task: t.task, turn: t.turn,
        created_at: `2026-08-12 09:00:0${i}`, metadata: subagentMetadata({ tool_call_id: `toolu_${i}` }) });
    }
    await db.install();
    await db.createHost('scraped');
    await db.up('scraped');
    bouncer = await startPgbouncer(db.url, { poolSize: 1 });
  }, 60_000);

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await bouncer?.stop();
  });

  it('backfill: cancelled through the pooler, exit 130, nothing written, and the pool serves kandev again', async () => {
    const holder = await db.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE public.kandev_meta IN SHARE MODE');
    const child = spawn(process.execPath, [cli, 'backfill', '--database-url', bouncer.url],
      { cwd: PACKAGE_ROOT, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      let blocked = false;
      for (let i = 0; i < 300 && !blocked; i++) {
        const { rows } = await db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                                           AND application_name = 'subagent-context' AND wait_event_type = 'Lock'`);
        blocked = rows.length > 0;
        if (!blocked) await new Promise((r) => setTimeout(r, 100));
      }
      expect(blocked, 'the CLI reached the locked statement').toBe(true);
      child.kill('SIGINT');
      const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('still running 20 s after Ctrl-C'), 20_000))]);
      expect(code).toBe(130);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await holder.query('COMMIT');
    }
    expect(stderr).toContain('interrupted: cancelling the statement on the server');
    expect(stderr.trim().split('\n').at(-1)).toBe('the cancelled transaction was rolled back: the capture trigger is installed ' +
      '(new subagents are recorded), the history is not backfilled and capture is not activated; run `subagent-context backfill` ' +
      'again to continue from there.');
    // Had the statement survived, it would commit now that the lock is gone: give it the time to.
    await new Promise((r) => setTimeout(r, 500));
    const { rows: [n] } = await db.query(`SELECT count(*)::int AS n FROM public.task_session_subagents`);
    expect(n.n).toBe(0);
    expect(await kandevAnswers()).toEqual({ t: '0', p: '"$user", public' });
  }, 60_000);

  it('a scrape abandoned while the exporter\'s query waits: the query is cancelled, and pgbouncer goes on serving', async () => {
    const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--cache-seconds', '0', '--timeout-seconds', '60',
      '--schema', 'scraped', '--database-url', bouncer.url], {}, exporterUrl, children);
    const holder = await db.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE scraped.task_session_subagents IN ACCESS EXCLUSIVE MODE');
    const waiting = async () => Number((await db.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()
      AND application_name = 'subagent-context metrics' AND wait_event_type = 'Lock'`)).rows[0].n);
    try {
      const scrape = new AbortController();
      const pending = fetch(started.value, { signal: scrape.signal }).then(() => 'answered', () => 'aborted');
      for (let i = 0; i < 100 && (await waiting()) === 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await waiting(), 'the evaluation waits on the lock').toBe(1);
      scrape.abort();
      expect(await pending).toBe('aborted');
      for (let i = 0; i < 30 && (await waiting()) > 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await waiting(), 'the query was cancelled').toBe(0);
    } finally {
      await holder.query('ROLLBACK');
    }
    await new Promise((r) => setTimeout(r, 500));
    expect(bouncer.log()).not.toMatch(/FATAL/);
    expect(await kandevAnswers()).toEqual({ t: '0', p: '"$user", public' });
    expect(await (await fetch(started.value)).text()).toMatch(/^subagent_context_up\{[^}]*\} 1$/m);
    started.child.kill('SIGTERM');
  }, 60_000);
});
