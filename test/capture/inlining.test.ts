// The capture path's cost rests on the planner inlining every per-row SQL helper into the trigger's one
// upsert. A helper that stops being inlined (a SET clause, a volatile argument, a changed volatility)
// still gives the right rows, only 10-100x slower per frame, so no behaviour test notices. PostgreSQL's
// function statistics do: with track_functions = 'all', every call that is not inlined is counted.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';

const db = await freshDatabase('inlining', { from: 'installed' });

async function functionCalls(c: Awaited<ReturnType<typeof db.connect>>) {
  // Pending statistics reach the shared counters when the backend goes idle after this request.
  await c.query('SELECT pg_stat_force_next_flush()');
  await c.query('SELECT 1');
  await c.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await c.query(
    `SELECT funcname::text AS funcname, calls::int AS calls FROM pg_stat_user_functions
      WHERE schemaname = 'public' ORDER BY funcname`);
  return rows;
}

describe('the capture path', () => {
  it('calls only the trigger function and its one upsert: subagent_context_derive_row and every helper are inlined', async () => {
    const c = await db.connect();
    await c.query(`SET track_functions = 'all'`);
    const t = await createTurn(c, 'public', 'inl');
    const frame = (status: string, subagent: Record<string, unknown>) =>
      subagentMetadata({ tool_call_id: 'toolu_inl', status, subagent });
    // Warm-up: PostgreSQL plans a cached statement for its actual parameters in its first five runs,
    // folding immutable helpers to constants (which counts as calls). From then on the trigger runs one
    // generic plan; a statement that kept being re-planned would keep counting.
    for (let i = 0; i < 8; i++) {
      await insertMessage(c, 'public', { id: `w${i}`, session: t.session, task: t.task, turn: t.turn,
        created_at: '2026-08-12 08:00:00', metadata: subagentMetadata({ tool_call_id: `toolu_w${i}`, status: 'completed',
          subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 5, tool_use_count: 0, duration_ms: 9 } }) });
    }
    const before = new Map((await functionCalls(c)).map((r) => [r.funcname, r.calls]));
    // A launch, an async frame, and a completed frame with every metric (the anomaly check runs).
    await insertMessage(c, 'public', { id: 'm1', session: t.session, task: t.task, turn: t.turn,
      created_at: '2026-08-12 09:00:00', metadata: frame('pending', { subagent_type: 'explorer' }) });
    await updateMessage(c, 'public', 'm1', frame('in_progress',
      { subagent_type: 'explorer', status: 'async_launched', is_async: true }), '2026-08-12 09:00:01');
    await updateMessage(c, 'public', 'm1', frame('completed', { subagent_type: 'explorer', status: 'completed',
      total_tokens: 48211, tool_use_count: 7, duration_ms: 91234, model: 'm' }), '2026-08-12 09:00:02');
    // A message that does not qualify never calls anything (the WHEN clause filters it).
    await insertMessage(c, 'public', { id: 'm2', session: t.session, task: t.task, turn: t.turn,
      created_at: '2026-08-12 09:00:03', metadata: '{"normalized":{"kind":"shell_exec"}}' });

    const calls = (await functionCalls(c))
      .map((r) => ({ funcname: r.funcname, calls: r.calls - (before.get(r.funcname) ?? 0) }))
      .filter((r) => r.calls !== 0);
    // The trigger and the one upsert (shared with repair's replay of failed captures): nothing else.
    expect(calls).toEqual([{ funcname: 'subagent_context_capture_message', calls: 3 }, { funcname: 'subagent_context_merge_message', calls: 3 }]);
    const { rows } = await c.query(
      `SELECT tool_status, agent_status, is_async, total_tokens, tool_use_count, duration_ms, settled_at
         FROM task_session_subagents WHERE tool_call_id = 'toolu_inl'`);
    expect(rows).toEqual([{ tool_status: 'completed', agent_status: 'completed', is_async: 1,
      total_tokens: 48211n, tool_use_count: 7n, duration_ms: 91234n, settled_at: '2026-08-12 09:00:02' }]);
  });
});
