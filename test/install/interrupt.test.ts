// Ctrl-C during `up`, `backfill` and `repair`: the CLI runs as a real child process and gets a real SIGINT
// while its statement waits on a lock this test holds (a stand-in for a backfill over a large history).
// Without the cancel, the statement would go on after the client died and commit once the lock is
// released; with it, the server-side statement is cancelled, nothing is written, and the CLI says what
// state the database is in, exit 130.
import { describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { builtCli as cliPath, exporterUrl, runCli, startCli } from '../helpers/cli.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const cli = cliPath();
const db = await freshDatabase('interrupt');

async function withHistory(schema: string) {
  await db.createHost(schema);
  const t = await createTurn(db.pool, schema, schema);
  for (let i = 0; i < 3; i++) {
    await insertMessage(db.pool, schema, { id: `m${i}`, session: t.session, task: t.task, turn: t.turn,
      created_at: `2026-08-12 09:00:0${i}`, metadata: subagentMetadata({ tool_call_id: `toolu_${i}` }) });
  }
  return t;
}

/**
 * Starts `subagent-context <args>`, holds `lock` in a transaction of this test, waits until the CLI's
 * backend is blocked on it, sends SIGINT (or, with `terminate`, ends its session with pg_terminate_backend,
 * as a DBA would), then releases the lock once the CLI has exited.
 */
async function interruptWhileBlocked(args: string[], lock: string, how: 'SIGINT' | 'terminate' = 'SIGINT') {
  const holder: pg.Client = await db.connect();
  await holder.query('BEGIN');
  await holder.query(lock);
  const child = spawn(process.execPath, [cli, ...args, '--database-url', db.url],
    { cwd: PACKAGE_ROOT, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // Blocked on our lock: the CLI's statement is running on the server.
  let blocked: number | undefined;
  for (let i = 0; i < 300 && !blocked; i++) {
    const { rows } = await db.query(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'subagent-context'
          AND wait_event_type = 'Lock'`);
    blocked = rows[0]?.pid;
    if (!blocked) await new Promise((r) => setTimeout(r, 100));
  }
  expect(blocked, 'the CLI reached the locked statement').toBeDefined();
  if (how === 'SIGINT') child.kill('SIGINT');
  else await db.query('SELECT pg_terminate_backend($1)', [blocked]);
  const code = await exited;
  const { rows: left } = await db.query(
    `SELECT pid, state, query FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'subagent-context%'`);
  await holder.query('COMMIT');
  // Had the statement survived, it would commit now: give it the time to.
  await new Promise((r) => setTimeout(r, 500));
  return { code, stdout, stderr, left };
}

const count = async (sql: string) => Number((await db.query(sql)).rows[0].n);

describe('Ctrl-C cancels the server-side statement', () => {
  it('backfill: exit 130, rolled back, not activated, and a rerun continues', async () => {
    await withHistory('bf');
    await db.install('bf');
    const r = await interruptWhileBlocked(['backfill', '--schema', 'bf'], 'LOCK TABLE bf.kandev_meta IN SHARE MODE');
    expect(r.code).toBe(130);
    expect(r.left, 'no statement of the CLI is left on the server').toEqual([]);
    expect(r.stderr).toContain('interrupted: cancelling the statement on the server');
    expect(r.stderr.trim().split('\n').at(-1)).toBe('the cancelled transaction was rolled back: the capture trigger is installed ' +
      '(new subagents are recorded), the history is not backfilled and capture is not activated; run `subagent-context backfill` ' +
      'again to continue from there.');
    expect(await count(`SELECT count(*) AS n FROM bf.task_session_subagents`)).toBe(0);
    expect(await count(`SELECT count(*) AS n FROM bf.kandev_meta WHERE key LIKE 'subagent_context_%'`)).toBe(0);
    // The rerun the sentence promises.
    const again = await db.up('bf');
    expect(again.backfill).toMatchObject({ status: 'activated', inserted: 3 });
  });

  it('up: exit 130, says what is installed, and the activation did not commit', async () => {
    await withHistory('upx');
    const r = await interruptWhileBlocked(['up', '--schema', 'upx'], 'LOCK TABLE upx.kandev_meta IN SHARE MODE');
    expect(r.code).toBe(130);
    expect(r.left).toEqual([]);
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(
      /^the cancelled transaction was rolled back: the capture trigger is (installed \(new subagents are recorded\)|not installed), the history is not backfilled and capture is not activated; run `subagent-context up` again to continue from there\.$/);
    expect(await count(`SELECT count(*) AS n FROM upx.kandev_meta WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through')`)).toBe(0);
    const again = await db.up('upx');
    expect(again.backfill.status).toBe('activated');
  });

  it('repair: exit 130, the running batch rolled back (no row stored)', async () => {
    const t = await withHistory('rp');
    await db.up('rp');
    await db.query('ALTER TABLE rp.task_session_messages DISABLE TRIGGER subagent_context_capture');
    await insertMessage(db.pool, 'rp', { id: 'missed', session: t.session, task: t.task, turn: t.turn,
      created_at: '2099-01-01 00:00:00', metadata: subagentMetadata({ tool_call_id: 'toolu_missed' }) });
    await db.query('ALTER TABLE rp.task_session_messages ENABLE TRIGGER subagent_context_capture');
    const before = await count('SELECT count(*) AS n FROM rp.task_session_subagents');
    const r = await interruptWhileBlocked(['repair', '--schema', 'rp'], 'LOCK TABLE rp.task_session_subagents IN SHARE MODE');
    expect(r.code).toBe(130);
    expect(r.left).toEqual([]);
    expect(r.stderr.trim().split('\n').at(-1)).toBe('repair stopped: 0 missing rows stored and 0 failed captures replayed ' +
      'in the batches that had committed (the one running was rolled back); run `subagent-context repair` again to do the rest.');
    expect(await count('SELECT count(*) AS n FROM rp.task_session_subagents')).toBe(before);
  });
});

describe('what an interrupted or ended command says it kept', () => {
  it('backfill: Ctrl-C after committed batches names them and the rows they stored; a rerun continues after them', async () => {
    // 600 subagents of history: the walk (newest first, 500 messages a batch) commits one batch, then waits
    // on the oldest subagent's key, which a transaction of this test is inserting.
    await db.createHost('bfk');
    const t = await createTurn(db.pool, 'bfk', 'bfk');
    for (let i = 0; i < 600; i++) {
      await insertMessage(db.pool, 'bfk', { id: `m${i}`, session: t.session, task: t.task, turn: t.turn,
        created_at: `2026-08-12 09:${String(Math.floor(i / 60)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}`,
        metadata: subagentMetadata({ tool_call_id: `toolu_${i}` }) });
    }
    await db.install('bfk');
    // Batches of 500 messages (docs/health.md#tuning), for this database's new sessions.
    await db.query(`ALTER DATABASE "${db.name}" SET subagent_context.batch_messages = 500`);
    const r = await interruptWhileBlocked(['backfill', '--schema', 'bfk'],
      `INSERT INTO bfk.task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id, observed_at, updated_at)
       VALUES ('held', '${t.session}', '${t.task}', 'toolu_0', 'unknown', '2026-08-12 09:00:00', '2026-08-12 09:00:00')`);
    expect(r.code).toBe(130);
    expect(r.left).toEqual([]);
    const kept = await count(`SELECT count(*) AS n FROM bfk.task_session_subagents WHERE source = 'backfill'`);
    expect(kept).toBe(500);
    expect(r.stderr.trim().split('\n').at(-1)).toBe('the backfill stopped after 1 committed batch, which stored 500 history rows (kept), ' +
      'and the batch running was rolled back: the capture trigger is installed (new subagents are recorded), capture is not activated yet, ' +
      'and `subagent-context backfill` continues the backfill from where it stopped.');
    expect(await count(`SELECT count(*) AS n FROM bfk.kandev_meta WHERE key LIKE 'subagent_context_%'`)).toBe(0);
    // The rerun the sentence promises: the other 99 (the held key has its row), not the 500 again.
    await db.query(`ALTER DATABASE "${db.name}" RESET subagent_context.batch_messages`);
    const again = await db.up('bfk');
    // The rerun reports what it stored, and the interrupted run's committed rows apart.
    expect(again.backfill).toMatchObject({ status: 'activated' });
    expect(Number(again.backfill.inserted) + Number(again.backfill.inserted_before ?? 0)).toBe(599);
    expect(await count(`SELECT count(*) AS n FROM bfk.task_session_subagents`)).toBe(600);
  });

  it('health --full ended by pg_terminate_backend: exit 3, what is kept and the next step', async () => {
    await withHistory('hf');
    await db.up('hf');
    const r = await interruptWhileBlocked(['health', '--full', '--schema', 'hf'], 'LOCK TABLE hf.subagent_context_reconciliations IN EXCLUSIVE MODE', 'terminate');
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: the database ended this session (terminating connection due to administrator command: ' +
      'pg_terminate_backend, a restart or a shutdown); every step the reconciliation completed is kept and the next health ' +
      'checks continue it; `subagent-context health --full` again, once the server accepts connections, compares everything from the start.');
    const again = await runCli(cli, ['health', '--full', '--schema', 'hf'], { DATABASE_URL: db.url });
    expect(again.code, again.stderr).toBe(0);
  });

  it('metrics --listen: SIGINT while the reconciliation after a scrape runs stops quietly, exit 0', async () => {
    await withHistory('mx');
    await db.up('mx');
    // A reconciliation is due (the last one is two hours old), and its first write waits on this lock;
    // health's reads do not.
    await db.query(`UPDATE mx.subagent_context_reconciliations SET started_at = started_at - interval '2 hours'`);
    const holder: pg.Client = await db.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE mx.subagent_context_reconciliations IN EXCLUSIVE MODE');
    const children: ChildProcess[] = [];
    try {
      const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--schema', 'mx', '--cache-seconds', '0'],
        { DATABASE_URL: db.url }, exporterUrl, children);
      expect(await (await fetch(started.value)).text()).toMatch(/^subagent_context_up\{schema="mx"\} 1$/m);
      let waiting = false;
      for (let i = 0; i < 100 && !waiting; i++) {
        const { rows } = await db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
            AND application_name = 'subagent-context metrics (reconciliation)' AND wait_event_type = 'Lock'`);
        waiting = rows.length > 0;
        if (!waiting) await new Promise((res) => setTimeout(res, 100));
      }
      expect(waiting, 'the reconciliation after the scrape waits on the lock').toBe(true);
      started.child.kill('SIGINT');
      expect(await started.exited).toBe(0);
      // Not "after evaluation: Client was closed and is not queryable": the exporter closed it on purpose.
      expect(started.stderr()).toBe('');
    } finally {
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });
});
