// A replay ends with the row as its message is at the merge (docs/reliability.md#replay): a newer frame of
// the message committed between the replay's read and its merge, or written after the merge, never loses to
// the older snapshot the replay had read, and the failure is marked replayed only then. Each ordering is
// forced with the replay's pause points (subagent_context_pause(): the test holds an advisory lock and lets
// go once its frame is where it must be), not slept into. On 4259581 the first ordering left the row
// 'running' (the replay's older frame) under a message that says 'completed', the failure marked replayed.
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { storedAndDerived } from '../helpers/stored-and-derived.js';
import { quoteIdent } from '#sql';

const db = await freshDatabase('replay_race');
const q = async (sql: string, values?: unknown[]) => (await db.query(sql, values)).rows;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const frame = (call: string, status: string, subagent: Record<string, unknown>) =>
  subagentMetadata({ tool_call_id: call, status, subagent });

/** Waits until `pid` is in the state `matches` accepts (pg_stat_activity), polling every few ms. */
async function until(pid: number, what: string, matches: (a: { wait_event_type: string | null; wait_event: string | null }) => boolean) {
  for (const end = Date.now() + 30_000; Date.now() < end; await sleep(3)) {
    const [a] = await q(`SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = $1`, [pid]);
    if (a && matches(a as { wait_event_type: string | null; wait_event: string | null })) return;
  }
  throw new Error(`backend ${pid} never ${what}`);
}

/** A schema with one call whose latest frame failed to capture (a row lock held past 200 ms): its row is stale. */
async function staleCall(schema: string) {
  await db.createHost(schema);
  await db.up(schema);
  const t = await createTurn(db.pool, schema, schema);
  await insertMessage(db.pool, schema, { id: 'm', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:01',
    metadata: frame('toolu_m', 'pending', { status: 'async_launched' }) });
  const locker = await db.connect();
  await locker.query('BEGIN');
  await locker.query(`SELECT 1 FROM ${schema}.task_session_subagents FOR UPDATE`);
  await updateMessage(db.pool, schema, 'm', frame('toolu_m', 'in_progress', { status: 'running', total_tokens: 100 }), '2099-01-01 00:00:02');
  await locker.query('COMMIT');
  await locker.end();
  expect(await q(`SELECT sqlstate FROM ${schema}.subagent_context_failures`)).toEqual([{ sqlstate: '55P03' }]);
  const before = await storedAndDerived(db, schema, 'toolu_m');
  expect(before.stored).not.toEqual(before.derived);
}

/** Starts one replay batch on its own connection, paused at `point` while the test holds the pause lock. */
async function pausedReplay(schema: string, point: string) {
  const holder = await db.connect();
  await holder.query('BEGIN');
  await holder.query(`SELECT pg_advisory_xact_lock(hashtext('subagent_context.pause'), hashtext($1))`, [point]);
  const replayer: pg.Client = await db.connect();
  await replayer.query(`SET subagent_context.pause_at = '${point}'`);
  const pid = (await replayer.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
  const done = replayer.query(`SELECT replayed::int, unreplayed::int FROM ${quoteIdent(schema)}.subagent_context_replay_failures()`)
    .then((r) => r.rows[0]).finally(() => replayer.end());
  await until(pid, 'reached the pause', (a) => a.wait_event === 'PgSleep');
  return { pid, done, release: async () => { await holder.query('COMMIT'); await holder.end(); } };
}

describe('a replay racing a newer frame of its message', () => {
  it('a newer frame committed between the replay\'s read and its merge: the row ends as the message is', async () => {
    await staleCall('between');
    const replay = await pausedReplay('between', 'replay: before merge');
    // The replay has read the 'running' frame; kandev now commits the completed one (captured: nothing holds the row).
    await updateMessage(db.pool, 'between', 'm', frame('toolu_m', 'completed', { status: 'completed', total_tokens: 900 }), '2099-01-01 00:00:03');
    await replay.release();
    expect(await replay.done).toEqual({ replayed: 1, unreplayed: 0 });
    const after = await storedAndDerived(db, 'between', 'toolu_m');
    expect(after.stored).toEqual(after.derived);
    expect(after.stored).toMatchObject([{ agent_status: 'completed', tool_status: 'completed', total_tokens: 900n }]);
    expect(await q(`SELECT sqlstate, replayed_at IS NOT NULL AS replayed FROM between.subagent_context_failures`))
      .toEqual([{ sqlstate: '55P03', replayed: true }]);
  });

  it('a newer frame written after the merge waits for the replay\'s row, then merges over it: captured, and the row ends as the message is', async () => {
    await staleCall('after');
    const replay = await pausedReplay('after', 'replay: after merge');
    // The replay has merged the 'running' frame and holds the row; kandev writes the completed frame, whose
    // capture waits for that row: the test lets the replay go as soon as the capture is seen waiting.
    const writer = await db.connect();
    const writerPid = (await writer.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    await writer.query(`SET statement_timeout = '2s'`);
    const written = updateMessage(writer, 'after', 'm', frame('toolu_m', 'completed', { status: 'completed', total_tokens: 900 }), '2099-01-01 00:00:03');
    await until(writerPid, 'waited for the replay\'s row', (a) => a.wait_event_type === 'Lock');
    await replay.release();
    await written;
    await writer.end();
    expect(await replay.done).toEqual({ replayed: 1, unreplayed: 0 });
    const after = await storedAndDerived(db, 'after', 'toolu_m');
    expect(after.stored).toEqual(after.derived);
    expect(after.stored).toMatchObject([{ agent_status: 'completed', total_tokens: 900n }]);
    // The frame was captured: the only failure is the one replayed.
    expect(await q(`SELECT sqlstate, replayed_at IS NOT NULL AS replayed FROM after.subagent_context_failures`))
      .toEqual([{ sqlstate: '55P03', replayed: true }]);
  });
});
