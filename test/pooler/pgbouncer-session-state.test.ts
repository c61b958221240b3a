// Behind pgbouncer in transaction pooling (docs/install.md#behind-a-connection-pooler): nothing of ours
// outlives its transaction. With one server connection in the pool, every client's transactions run on
// it in turn, so a kandev client through the same pooler sees whatever a command left on that session.
// After every command it must see PostgreSQL's defaults, none of our settings and no advisory lock; a
// kandev client polling during `up --schema other` never sees `other`; kandev's writers through the
// pooler, during every command, all succeed, into kandev's schema, under their own execution ids.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { ChildProcess } from 'node:child_process';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, exporterUrl, runCli, startCli } from '../helpers/cli.js';
import { PGBOUNCER, startPgbouncer, type Pgbouncer } from '../helpers/pgbouncer.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { NODE_PG_MIGRATE } from '../helpers/migrations.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

if (!PGBOUNCER) console.warn('pgbouncer-session-state.test.ts skipped: pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)');

const db = await freshDatabase('pgbouncer_state', { from: 'host' });
const cli = builtCli();
const children: ChildProcess[] = [];
let bouncer: Pgbouncer;
let kandev: pg.Client;

/** What a kandev client through the pooler finds on the server session it is given. */
interface Seen {
  statement_timeout: string;
  lock_timeout: string;
  search_path: string;
  ours: string[];
  advisory: string[];
}

async function look(client: pg.Client): Promise<Seen> {
  const { rows: [r] } = await client.query<Seen>(
    `SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('lock_timeout') AS lock_timeout,
            current_setting('search_path') AS search_path,
            -- Ours: the settings the installation reads (pg_settings does not list such custom ones). A
            -- transaction-local set_config leaves one behind defined but empty; one with a value is left over.
            array(SELECT n || '=' || v FROM unnest(ARRAY['subagent_context.backfill_by', 'subagent_context.lock_timeout',
                          'subagent_context.lock_tries', 'subagent_context.agent_execution_id']) AS n,
                         coalesce(current_setting(n, true), '') AS v WHERE v <> '' ORDER BY 1) AS ours,
            array(SELECT format('%s %s/%s by pid %s', mode, classid, objid, pid) FROM pg_locks
                   WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   ORDER BY 1) AS advisory`);
  return r;
}

const DEFAULTS: Seen = { statement_timeout: '0', lock_timeout: '0', search_path: '"$user", public', ours: [], advisory: [] };

/** Two kandev writers through the pooler, as kandev writes: each frame in a transaction tagged with its execution id. */
function startWriters(label: string) {
  const failures: string[] = [];
  const written: { id: string; execution: string }[] = [];
  let stop = false;
  const writer = async (w: number) => {
    const c = new pg.Client(bouncer.url);
    c.on('error', () => {});
    await c.connect();
    const execution = `exec-${label}-${w}`;
    try {
      for (let i = 0; !stop; i++) {
        const id = `msg-${label}-${w}-${i}`;
        const frame = (status: string) => subagentMetadata({ tool_call_id: `toolu_${id}`, status, subagent: { model: 'm' } });
        try {
          // Unqualified, as kandev writes: a search_path left by someone else would send it elsewhere.
          await c.query('BEGIN');
          await c.query(`SELECT set_config('subagent_context.agent_execution_id', $1, true)`, [execution]);
          await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                         VALUES ($1, 'session-w', 'task-w', 'turn-w', 'agent', '', 'tool_call', $2, now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC')`,
          [id, frame('pending')]);
          await c.query('COMMIT');
          await c.query('BEGIN');
          await c.query(`SELECT set_config('subagent_context.agent_execution_id', $1, true)`, [execution]);
          await c.query(`UPDATE task_session_messages SET metadata = $2, updated_at = now() AT TIME ZONE 'UTC' WHERE id = $1`, [id, frame('completed')]);
          await c.query('COMMIT');
          written.push({ id, execution });
        } catch (err) {
          failures.push(`${id}: ${(err as Error).message}`);
          await c.query('ROLLBACK').catch(() => {});
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await c.end().catch(() => {});
    }
  };
  const running = Promise.all([writer(1), writer(2)]);
  return {
    async stop() {
      stop = true;
      await running;
      return { failures, written };
    },
  };
}

/**
 * Runs a command through the pooler with kandev's writers going; checks every write and returns what the
 * next kandev transaction sees. `capturing`: the capture trigger is on kandev's table throughout (not
 * being installed or removed), so every frame must have its row, live, under its writer's execution id.
 */
async function during<T>(label: string, command: () => Promise<T>, capturing = true): Promise<{ result: T; after: Seen; polled: Map<string, number> }> {
  const writers = startWriters(label);
  const poller = startPoller();
  let result: T;
  let writes: Awaited<ReturnType<typeof writers.stop>>;
  let polled: Map<string, number>;
  try {
    await new Promise((r) => setTimeout(r, 100));
    result = await command();
    await new Promise((r) => setTimeout(r, 100));
  } finally {
    writes = await writers.stop();
    polled = await poller.stop();
  }
  const { failures, written } = writes;
  expect(failures).toEqual([]);
  expect(written.length).toBeGreaterThan(2);
  // Every frame landed in kandev's schema, once, under its writer's execution id, with its last status.
  const { rows } = await db.query(
    `SELECT m.id, s.agent_execution_id, s.tool_status, s.source
       FROM public.task_session_messages AS m
       LEFT JOIN public.task_session_subagents AS s ON s.task_session_id = m.task_session_id AND s.tool_call_id = 'toolu_' || m.id
      WHERE m.id = ANY($1::text[]) ORDER BY m.id`, [written.map((w) => w.id)]);
  const expected = new Map(written.map((w) => [w.id, w.execution]));
  expect(rows.map((r) => r.id)).toEqual([...expected.keys()].sort());
  for (const r of rows) {
    if (capturing) expect(r).toEqual({ id: r.id, agent_execution_id: expected.get(r.id), tool_status: 'completed', source: 'live' });
    // While the trigger comes or goes, a frame has its own row, the backfill's (which cannot know the
    // transaction's setting), or none; never another writer's.
    else if (r.source === 'live') expect(r.agent_execution_id).toBe(expected.get(r.id));
    else expect([null, 'unknown']).toContain(r.agent_execution_id);
  }
  const { rows: [elsewhere] } = await db.query(
    `SELECT (SELECT count(*) FROM other.task_session_messages WHERE id LIKE 'msg-%')
          + (SELECT count(*) FROM third.task_session_messages WHERE id LIKE 'msg-%') AS n`);
  expect(Number(elsewhere.n)).toBe(0);
  return { result: result!, after: await look(kandev), polled };
}

/** A kandev client through the pooler that looks at its session every few milliseconds: what it saw, and how often. */
function startPoller() {
  const seen = new Map<string, number>();
  let stop = false;
  const running = (async () => {
    const c = new pg.Client(bouncer.url);
    c.on('error', () => {});
    await c.connect();
    try {
      while (!stop) {
        const s = JSON.stringify(await look(c));
        seen.set(s, (seen.get(s) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
      }
    } finally {
      await c.end().catch(() => {});
    }
  })();
  return { async stop() { stop = true; await running; return seen; } };
}

/** What the poller saw other than the defaults, with how many polls saw it: nothing, when nothing of ours leaked. */
function leaks(polled: Map<string, number>): string[] {
  expect([...polled.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(5);
  return [...polled].filter(([s]) => s !== JSON.stringify(DEFAULTS)).map(([s, n]) => `${n} polls saw ${s}`);
}

const cliThrough = (args: string[]) => runCli(cli, [...args, '--database-url', bouncer.url]);

describe.skipIf(!PGBOUNCER)('through pgbouncer, one pooled server connection shared by every client', () => {
  beforeAll(async () => {
    await db.createHost('other');
    await db.createHost('third');
    // Writers' parents, in kandev's schema only: a write sent to `other` fails on its foreign key.
    await createTurn(db.pool, 'public', 'w');
    // History for the backfill.
    const t = await createTurn(db.pool, 'public', 'hist');
    for (let i = 0; i < 50; i++) {
      await insertMessage(db.pool, 'public', { id: `hist-${i}`, session: t.session, task: t.task, turn: t.turn,
        created_at: '2026-08-01 08:00:00', metadata: subagentMetadata({ tool_call_id: `toolu_hist_${i}`, status: 'completed' }) });
    }
  }, 60_000);

  // A pooler of its own for each command, so that what one command leaves cannot be blamed on another.
  beforeEach(async () => {
    bouncer = await startPgbouncer(db.url, { poolSize: 1 });
    kandev = new pg.Client(bouncer.url);
    kandev.on('error', () => {});
    await kandev.connect();
    expect(await look(kandev)).toEqual(DEFAULTS);
  });

  afterEach(async () => {
    await kandev?.end().catch(() => {});
    await bouncer?.stop();
  });

  afterAll(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  });

  it('up: installs, backfills, leaves the session as it found it', async () => {
    const { result, after, polled } = await during('up', () => cliThrough(['up']), false);
    expect(leaks(polled)).toEqual([]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    // The history, and the frames the writers wrote before the trigger was there (pgbouncer-up.test.ts checks the count).
    expect(Number(/rows backfilled\s+(\d+)/.exec(result.stdout)?.[1])).toBeGreaterThanOrEqual(50);
    expect(after).toEqual(DEFAULTS);
  }, 120_000);

  it('up --schema other: a kandev client polling through the pooler never sees search_path = other, or anything of ours', async () => {
    const { result, after, polled } = await during('up-other', () => cliThrough(['up', '--schema', 'other']));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(leaks(polled)).toEqual([]);
    expect(after).toEqual(DEFAULTS);
    const { rows: [h] } = await db.query(`SELECT activated FROM other.subagent_context_health()`);
    expect(h.activated).toBe(true);
  }, 120_000);

  it.each([
    ['health', ['health']],
    ['health --full', ['health', '--full']],
    ['repair', ['repair']],
    ['report', ['report']],
    ['metrics --once', ['metrics', '--once']],
  ])('%s leaves the session as it found it', async (label, args) => {
    const { result, after, polled } = await during(label.replace(/\W+/g, '-'), () => cliThrough(args));
    expect(result.code, result.stderr).toBe(0);
    expect(leaks(polled)).toEqual([]);
    expect(after).toEqual(DEFAULTS);
  }, 120_000);

  it('a running exporter, scraped: its evaluations and the reconciliation after them leave the session as they found it', async () => {
    const { after, polled } = await during('exporter', async () => {
      const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--cache-seconds', '0', '--database-url', bouncer.url],
        {}, exporterUrl, children);
      for (let i = 0; i < 3; i++) {
        const text = await (await fetch(started.value)).text();
        expect(text).toMatch(/^subagent_context_up\{[^}]*\} 1$/m);
        // The reconciliation's step follows each evaluation, in the background.
        await new Promise((r) => setTimeout(r, 1500));
      }
      const seen = await look(kandev);
      started.child.kill('SIGTERM');
      await started.exited;
      return seen;
    });
    expect(leaks(polled)).toEqual([]);
    expect(after).toEqual(DEFAULTS);
  }, 120_000);

  // Plain node-pg-migrate sets search_path and takes its lock on the session before any migration runs,
  // where the migrations cannot reach (its writers would fail meanwhile: docs/install.md gives it a direct
  // URL); each migration's transaction puts search_path back, so nothing stays after it.
  it('plain node-pg-migrate up --schema third through the pooler leaves no search_path and no lock behind', async () => {
    const result = await promisify(execFile)(process.execPath, [NODE_PG_MIGRATE, 'up',
      '-m', 'migrations', '--migrations-table', 'subagent_context_migrations', '--schema', 'third', '--no-verbose', '--no-single-transaction'],
    { cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: bouncer.url }, timeout: 120_000 });
    expect(result.stdout).toMatch(/Migrations complete!/);
    expect(await look(kandev)).toEqual(DEFAULTS);
    const { rows: [h] } = await db.query(`SELECT activated FROM third.subagent_context_health()`);
    expect(h.activated).toBe(true);
  }, 120_000);

  it.each(['other', 'third', 'public'])('uninstall --schema %s leaves the session as it found it', async (schema) => {
    const { result, after, polled } = await during(`uninstall-${schema}`, () => cliThrough(['uninstall', '--schema', schema]), schema !== 'public');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^uninstalled; kept/m);
    expect(leaks(polled)).toEqual([]);
    expect(after).toEqual(DEFAULTS);
  }, 120_000);
});
