// The backfill works in bounded batches that each commit (docs/reliability.md#backfill): a live write of a
// historical subagent message never waits for the whole backfill, the activation keys appear only once
// every batch succeeded, and a backfill killed part-way continues on the next run, with no duplicate and
// exactly the rows an uninterrupted run stores.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { backfill, migrate } from '../../src/install.js';

const db = await freshDatabase('backfill_batches');

const SESSIONS = 100;
const CALLS = 60;          // 6,000 subagent calls ...
const FRAMES = 2;          // ... of two frames each (the newer one wins) ...
const NOISE = 20;          // ... among 2,000 ordinary messages per run
const BATCH = 40;          // small batches, so that the walk takes a while on a small store

/** History in `schema`: kandev's tables, capture installed with health's index, not activated yet. */
async function history(schema: string) {
  await db.createHost(schema);
  const s = `"${schema}"`;
  await db.query(`
    INSERT INTO ${s}.tasks (id, title, created_at, updated_at) SELECT 'task-' || g, 't', '2026-08-01', '2026-08-01' FROM generate_series(1, ${SESSIONS}) g;
    INSERT INTO ${s}.task_sessions (id, task_id, started_at, updated_at) SELECT 'session-' || g, 'task-' || g, '2026-08-01', '2026-08-01' FROM generate_series(1, ${SESSIONS}) g;
    INSERT INTO ${s}.task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
      SELECT 'turn-' || g, 'session-' || g, 'task-' || g, '2026-08-01', '2026-08-01', '2026-08-01' FROM generate_series(1, ${SESSIONS}) g;
    INSERT INTO ${s}.task_session_messages (id, task_session_id, task_id, turn_id, content, metadata, created_at, updated_at)
    SELECT 'msg-' || g || '-' || i || '-' || f, 'session-' || g, 'task-' || g, 'turn-' || g, '',
           json_build_object('tool_call_id', 'toolu_' || g || '_' || i, 'title', 'Task',
             'status', CASE WHEN f = ${FRAMES} THEN 'completed' ELSE 'pending' END,
             'normalized', json_build_object('kind', 'subagent_task', 'subagent_task',
               json_build_object('subagent_type', 'explorer', 'description', 'frame ' || f, 'total_tokens', g * 1000 + i)))::text,
           -- Both frames of a call share their created_at: the greater id (frame 2) is the newer one.
           timestamp '2026-08-01' + make_interval(secs => g * 1000 + i),
           timestamp '2026-08-01' + make_interval(secs => g * 1000 + i + f)
      FROM generate_series(1, ${SESSIONS}) g, generate_series(1, ${CALLS}) i, generate_series(1, ${FRAMES}) f;
    INSERT INTO ${s}.task_session_messages (id, task_session_id, task_id, turn_id, content, metadata, created_at, updated_at)
    SELECT 'note-' || g || '-' || i, 'session-' || g, 'task-' || g, 'turn-' || g, 'hello', '{"kind":"message"}', '2026-08-01', '2026-08-01'
      FROM generate_series(1, ${SESSIONS}) g, generate_series(1, ${NOISE}) i;
    ANALYZE ${s}.task_session_messages;`);
  const c = await db.connect();
  await migrate(c, schema, 'up');  // the migrations as `up` runs them: the backfill is left to the caller
}

const keys = async (schema: string) =>
  (await db.query(`SELECT key FROM "${schema}".kandev_meta WHERE key LIKE 'subagent_context_%' ORDER BY key`)).rows.map((r) => r.key);

const rows = async (schema: string) =>
  (await db.query(`SELECT task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, subagent_type, description,
                          tool_status, total_tokens, source, observed_at, settled_at, updated_at
                     FROM "${schema}".task_session_subagents ORDER BY task_session_id, tool_call_id`)).rows;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Each test waits on conditions; this bound only ends one that hangs (a loaded machine is slow, not wrong). */
const HANG = 900_000;

await history('whole');
await history('killed');
await history('counted');

describe('a backfill of several seconds, batch by batch', () => {
  it('never holds a live write of a historical message, and writes the keys only at the end', async () => {
    // Judged on the server's state, read in one snapshot, never on this process's clock or on when the
    // backfill's promise settles (on a loaded machine that can be long after its last commit; on 4259581
    // the keys read in that gap counted as "seen early").
    const runner = await db.connect();
    const writer = await db.connect();
    // A guard against a hang only; whether a write waited for the backfill is judged below.
    await writer.query(`SET statement_timeout = '60s'`);
    let finished = false;
    const started = performance.now();
    // Batches of 10 here, so that the walk outlasts a second and the writes below meet it.
    await runner.query(`SET subagent_context.batch_messages = 10`);
    const running = backfill(runner, 'whole').finally(() => { finished = true; });

    /** In one snapshot: are the keys there, is a walk recorded as under way, how many rows are stored. */
    const state = async () => (await db.query(`
      SELECT (SELECT count(*)::int FROM whole.kandev_meta WHERE key LIKE 'subagent_context_%') AS keys,
             (SELECT count(*)::int FROM whole.subagent_context_backfill_progress) AS walking,
             (SELECT count(*)::int FROM whole.task_session_subagents) AS stored`)).rows[0] as { keys: number; walking: number; stored: number };

    let keysSeenEarly = 0;
    let updated = 0;
    let writesAfterTheEnd = 0;
    while (!finished) {
      // A historical message whose row an earlier batch stored: kandev writes its next frame now.
      const { rows: [target] } = await db.query(
        `SELECT 'msg-' || split_part(r.tool_call_id, '_', 2) || '-' || split_part(r.tool_call_id, '_', 3) || '-${FRAMES}' AS id
           FROM whole.task_session_subagents AS r
          WHERE r.source = 'backfill' AND r.agent_status IS NULL ORDER BY r.observed_at DESC LIMIT 1`);
      if (target && (await state()).keys === 0) {
        await writer.query(
          `UPDATE whole.task_session_messages
              SET metadata = jsonb_set(metadata::jsonb, '{normalized,subagent_task,status}', '"live"')::text
            WHERE id = $1`, [target.id]);
        updated++;
        // Begun while the walk was under way: had it waited for the whole backfill, it would return
        // only after the keys were written. One write at a time, so only the one that met the last
        // batch may legitimately return after it.
        if ((await state()).keys > 0) writesAfterTheEnd++;
      }
      // The keys come in the transaction that ends the walk, with every row stored: never beside a walk
      // still under way, never before the last row.
      const now = await state();
      if (now.keys > 0 && (now.walking > 0 || now.stored < SESSIONS * CALLS)) keysSeenEarly++;
      await sleep(50);
    }
    const result = await running;
    const took = performance.now() - started;

    expect(result).toMatchObject({ status: 'activated', inserted: SESSIONS * CALLS });
    expect(took).toBeGreaterThan(1000);          // long enough for the writes above to meet it
    expect(updated).toBeGreaterThan(5);
    expect(writesAfterTheEnd).toBeLessThanOrEqual(1);
    expect(keysSeenEarly).toBe(0);
    expect(await keys('whole')).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    // Each of those writes was captured into the row the backfill had stored, none failed.
    expect((await db.query(`SELECT count(*)::int AS n FROM whole.subagent_context_failures`)).rows[0].n).toBe(0);
    expect((await db.query(`SELECT count(*)::int AS n FROM whole.task_session_subagents WHERE agent_status = 'live'`)).rows[0].n)
      .toBe(updated);
    expect((await db.query(`SELECT count(*)::int AS n FROM whole.subagent_context_backfill_progress`)).rows[0].n).toBe(0);
  }, HANG);

  it('reads each entry of health\'s index about twice, however many batches: each batch starts where the last stopped', async () => {
    // Each batch used to read the index again from its newest entry (the bound sat under an `IS NULL OR`,
    // which a parameterized plan cannot use), so a backfill was quadratic in history. Now a batch reads its
    // window's entries twice: once to find where the window ends, once to derive it.
    // ... and each batch looks up the keys it met through the table's index, not by reading the whole
    // table (PostgreSQL 17 did, once per batch, for keys given as IN (subquery)).
    const reads = async () => {
      await db.query('SELECT pg_stat_clear_snapshot()');
      const { rows: [r] } = await db.query(`
        SELECT (SELECT idx_tup_read FROM pg_stat_user_indexes
                 WHERE schemaname = 'counted' AND indexrelname = 'subagent_context_recent_messages_idx')::float8 AS "index",
               (SELECT seq_tup_read FROM pg_stat_user_tables
                 WHERE schemaname = 'counted' AND relname = 'task_session_subagents')::float8 AS "table"`);
      return r as { index: number; table: number };
    };
    const before = await reads();
    const runner = await db.connect();
    await runner.query(`SET subagent_context.batch_messages = ${BATCH}`);
    const result = await backfill(runner, 'counted');
    expect(result).toMatchObject({ status: 'activated', inserted: SESSIONS * CALLS });
    await runner.query('SELECT pg_stat_force_next_flush()');
    await runner.query('SELECT 1');
    const entries = SESSIONS * CALLS * FRAMES;
    let after = before;
    // Waits on the statistics, not a clock: a loaded server can take seconds to show them.
    for (let i = 0; i < 600 && after.index - before.index < entries; i++) {
      after = await reads();
      if (after.index - before.index < entries) await sleep(100);
    }
    expect(after.index - before.index).toBeGreaterThanOrEqual(entries);  // the walk read every entry ...
    expect(after.index - before.index).toBeLessThan(entries * 2.5);       // ... twice, and none of them batch after batch
    expect(after.table - before.table).toBeLessThan(SESSIONS * CALLS);
  }, HANG);

  it('killed part-way: no key; the rerun continues, with no duplicate and the rows of an uninterrupted run', async () => {
    const runner = await db.connect();
    const { rows: [{ pid }] } = await runner.query(`SELECT pg_backend_pid() AS pid`);
    await runner.query(`SET subagent_context.batch_messages = ${BATCH}`);
    const running = backfill(runner, 'killed').then(() => 'finished', (e: Error) => `error: ${e.message}`);
    for (;;) {
      const { rows: [p] } = await db.query(`SELECT batches FROM killed.subagent_context_backfill_progress`);
      if (p && p.batches >= 10n) break;
      await sleep(20);
    }
    await db.query(`SELECT pg_terminate_backend($1)`, [pid]);
    expect(await running).toMatch(/^error: /);
    expect(await keys('killed')).toEqual([]);
    const { rows: [{ n }] } = await db.query(`SELECT count(*)::int AS n FROM killed.task_session_subagents`);
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThan(SESSIONS * CALLS);

    const again = await db.connect();
    const stored = (await db.query(`SELECT inserted::int AS n FROM killed.subagent_context_backfill_progress`)).rows[0].n;
    const result = await backfill(again, 'killed');
    expect(result.status).toBe('activated');
    // This run reports what it stored, and the interrupted run's rows apart (on 4259581 all of them as its own).
    expect([result.inserted, result.inserted_before]).toEqual([SESSIONS * CALLS - stored, stored]);
    expect(await keys('killed')).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    const { rows: [{ total, distinct }] } = await db.query(
      `SELECT count(*)::int AS total, count(DISTINCT (task_session_id, tool_call_id))::int AS distinct FROM killed.task_session_subagents`);
    expect(total).toBe(SESSIONS * CALLS);
    expect(distinct).toBe(total);
    // The rows of the uninterrupted run, before its live writes: the same derivation from the same history.
    await db.query(`UPDATE whole.task_session_subagents SET agent_status = NULL WHERE agent_status = 'live'`);
    expect(await rows('killed')).toEqual(await rows('whole'));
    expect((await db.query(`SELECT value FROM killed.kandev_meta WHERE key = 'subagent_context_backfill_through'`)).rows)
      .toEqual((await db.query(`SELECT value FROM whole.kandev_meta WHERE key = 'subagent_context_backfill_through'`)).rows);
  }, HANG);
});
