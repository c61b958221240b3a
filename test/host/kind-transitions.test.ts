// docs/integration.md, docs/decisions.md#merge-and-identity: a message's kind changes over its life, and host rows get deleted. The row appears when a
// message becomes subagent_task, and stays through every later change except the deletion of its session.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';

const db = await freshDatabase('kind_transitions', { from: 'installed' });
const pool = db.pool;

async function rowsOf(toolCallId: string) {
  const { rows } = await db.query(`SELECT * FROM task_session_subagents WHERE tool_call_id = $1`, [toolCallId]);
  return rows;
}

/** A subagent call whose row exists and is settled; returns the row as stored. */
async function settledCall(key: string) {
  const t = await createTurn(pool, 'public', key);
  const call = `toolu_${key}`;
  await insertMessage(pool, 'public', {
    id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-08-12 09:00:00.5', updated_at: '2026-08-12 09:00:00.5',
    metadata: subagentMetadata({ tool_call_id: call, status: 'pending', subagent: { subagent_type: 'explorer' } }),
  });
  await updateMessage(pool, 'public', `msg-${key}`, subagentMetadata({
    tool_call_id: call, status: 'completed',
    subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 900, tool_use_count: 2, duration_ms: 60 },
  }), '2026-08-12 09:00:09');
  const rows = await rowsOf(call);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({
    turn_id: t.turn, tool_status: 'completed', settled_at: '2026-08-12 09:00:09', total_tokens: 900n,
    observed_at: '2026-08-12 09:00:00.5', updated_at: '2026-08-12 09:00:09',
  });
  return { ...t, call, id: `msg-${key}`, row: rows[0] };
}

describe('becoming a subagent_task', () => {
  it.each([
    ['a generic tool call', 'tool_call', JSON.stringify({ tool_call_id: 'toolu_late_kind', title: 'Task', status: 'pending', normalized: { kind: 'tool_call' } })],
    ['a plain message', 'message', '{}'],
    ['NULL metadata', 'tool_call', null],
  ])('%s later UPDATEd to subagent_task gets its row, observed at the message created_at', async (label, type, metadata) => {
    const key = `late_${type}_${String(metadata).length}`;
    const t = await createTurn(pool, 'public', key);
    const call = `toolu_late_kind`;
    await insertMessage(pool, 'public', {
      id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn, type,
      created_at: '2026-08-12 08:59:59.000001', updated_at: '2026-08-12 08:59:59.000001', metadata,
    });
    // A non-subagent UPDATE still writes nothing.
    await updateMessage(pool, 'public', `msg-${key}`, metadata, '2026-08-12 09:00:00');
    expect((await db.query(`SELECT count(*)::int AS n FROM task_session_subagents WHERE task_session_id = $1`, [t.session])).rows[0].n).toBe(0);

    await updateMessage(pool, 'public', `msg-${key}`, subagentMetadata({
      tool_call_id: call, status: 'in_progress', subagent: { subagent_type: 'explorer', status: 'started', child_session_id: 'ses_9' },
    }), '2026-08-12 09:00:04.25');
    const { rows } = await db.query(`SELECT * FROM task_session_subagents WHERE task_session_id = $1`, [t.session]);
    expect(rows).toHaveLength(1);
    const { id, ...row } = rows[0];
    expect(row).toEqual({
      task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: call, agent_execution_id: 'unknown',
      parent_tool_call_id: null, subagent_type: 'explorer', description: null, agent_id: null, child_session_id: 'ses_9',
      model: null, agent_status: 'started', tool_status: 'in_progress', is_async: 0,
      total_tokens: null, tool_use_count: null, duration_ms: null, source: 'live',
      observed_at: '2026-08-12 08:59:59.000001', settled_at: null, updated_at: '2026-08-12 09:00:04.25',
    });
  });
});

describe('changing away from subagent_task', () => {
  it.each([
    ['another kind', (call: string) => JSON.stringify({ tool_call_id: call, status: 'failed', normalized: { kind: 'tool_call' } })],
    ['no normalized', (call: string) => JSON.stringify({ tool_call_id: call, status: 'failed' })],
    ['empty object', () => '{}'],
    ['the literal null', () => 'null'],
    ['SQL NULL', () => null],
    ['text that is not JSON', () => 'subagent_task {'],
  ])('to %s leaves the row unchanged in every column', async (label, metadata) => {
    const c = await settledCall(`away_${label.replace(/\W+/g, '_')}`);
    const text = metadata(c.call);
    if (await db.hostRefuses(text)) {
      // On kandev's host its metadata index refuses the write itself (invalid JSON), before any trigger.
      await expect(updateMessage(pool, 'public', c.id, text, '2026-08-12 09:30:00')).rejects.toMatchObject({ code: '22P02' });
    } else {
      await updateMessage(pool, 'public', c.id, text, '2026-08-12 09:30:00');
    }
    expect(await rowsOf(c.call)).toEqual([c.row]);
  });
});

describe('deleting host rows', () => {
  it('deleting the message leaves the row', async () => {
    const c = await settledCall('del_message');
    await db.query(`DELETE FROM task_session_messages WHERE id = $1`, [c.id]);
    expect(await rowsOf(c.call)).toEqual([c.row]);
  });

  it('deleting the turn (and with it, by cascade, its messages) leaves the row, turn_id kept', async () => {
    const c = await settledCall('del_turn');
    await db.query(`DELETE FROM task_session_turns WHERE id = $1`, [c.turn]);
    expect((await db.query(`SELECT count(*)::int AS n FROM task_session_messages WHERE id = $1`, [c.id])).rows[0].n).toBe(0);
    expect(await rowsOf(c.call)).toEqual([c.row]);
    expect(c.row.turn_id).toBe(c.turn);
  });

  it("deleting the session removes its rows (FK cascade) and only its rows", async () => {
    const gone = await settledCall('del_session');
    const kept = await settledCall('del_session_neighbour');
    await db.query(`DELETE FROM task_sessions WHERE id = $1`, [gone.session]);
    expect(await rowsOf(gone.call)).toEqual([]);
    expect(await rowsOf(kept.call)).toEqual([kept.row]);
  });

  it('deleting the task removes its sessions and so their rows', async () => {
    const c = await settledCall('del_task');
    await db.query(`DELETE FROM tasks WHERE id = $1`, [c.task]);
    expect(await rowsOf(c.call)).toEqual([]);
  });
});
