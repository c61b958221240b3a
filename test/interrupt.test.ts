// Ctrl-C during `up`, `backfill` and `repair`: the CLI runs as a real child process and gets a real SIGINT
// while its statement waits on a lock this test holds (a stand-in for a backfill over a large history).
// Without the cancel, the statement would go on after the client died and commit once the lock is
// released; with it, the server-side statement is cancelled, nothing is written, and the CLI says what
// state the database is in, exit 130.
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import type pg from 'pg';
import { freshDatabase } from './helpers/database.js';
import { builtCli } from './helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata } from '../kandev/host.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const cli = builtCli();
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
 * backend is blocked on it, sends SIGINT, then releases the lock once the CLI has exited.
 */
async function interruptWhileBlocked(args: string[], lock: string) {
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
  let blocked = false;
  for (let i = 0; i < 300 && !blocked; i++) {
    const { rows } = await db.query(
      `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'subagent-context'
          AND wait_event_type = 'Lock'`);
    blocked = rows.length > 0;
    if (!blocked) await new Promise((r) => setTimeout(r, 100));
  }
  expect(blocked, 'the CLI reached the locked statement').toBe(true);
  child.kill('SIGINT');
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
