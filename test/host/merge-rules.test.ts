// docs/decisions.md#merge-and-identity: every merge rule of the single INSERT … ON CONFLICT DO UPDATE, one at a time, through the real
// trigger on real message INSERTs and UPDATEs, asserting every column of the derived row.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage, type SubagentFrame } from '../../kandev/host.js';

const db = await freshDatabase('merge_rules', { from: 'installed' });
const pool = db.pool;

async function rowOf(toolCallId: string, schema = 'public') {
  const { rows } = await db.query(`SELECT * FROM "${schema}".task_session_subagents WHERE tool_call_id = $1`, [toolCallId]);
  expect(rows).toHaveLength(1);
  return rows[0];
}

/** A tool call written as kandev does: INSERT once, then UPDATE in place per frame. */
async function toolCall(key: string, first: SubagentFrame, at = '2026-08-12 09:00:00') {
  const t = await createTurn(pool, 'public', key);
  const id = `msg-${key}`;
  const call = `toolu_${key}`;
  await insertMessage(pool, 'public', {
    id, session: t.session, task: t.task, turn: t.turn, created_at: at, updated_at: at,
    metadata: subagentMetadata({ tool_call_id: call, ...first }),
  });
  return {
    ...t, id, call,
    frame: (f: SubagentFrame, updatedAt: string) =>
      updateMessage(pool, 'public', id, subagentMetadata({ tool_call_id: call, ...f }), updatedAt),
  };
}

const full = {
  description: 'review the diff', subagent_type: 'security-reviewer', status: 'running', agent_id: 'agent-1',
  model: 'claude-opus-5', child_session_id: 'ses_1', total_tokens: 48211, tool_use_count: 7, duration_ms: 91234,
};

describe('fill-forward: NULL never blanks', () => {
  it('an empty later frame keeps every learned value', async () => {
    const c = await toolCall('fill', { status: 'in_progress', parent_tool_call_id: 'toolu_parent', subagent: full });
    const before = await rowOf(c.call);
    // Empty subagent_task, no top-level status, no parent: only updated_at may move.
    await c.frame({ subagent: {} }, '2026-08-12 09:00:05');
    expect(await rowOf(c.call)).toEqual({ ...before, updated_at: '2026-08-12 09:00:05' });
    // Empty strings are NULL too, and so is a frame with no subagent_task object at all.
    await c.frame({
      status: '', parent_tool_call_id: '',
      subagent: { description: '', subagent_type: '', status: '', agent_id: '', model: '', child_session_id: '' },
    }, '2026-08-12 09:00:06');
    await c.frame({ subagent: null }, '2026-08-12 09:00:07');
    expect(await rowOf(c.call)).toEqual({
      ...before,
      updated_at: '2026-08-12 09:00:07',
    });
    expect(before).toMatchObject({
      parent_tool_call_id: 'toolu_parent', subagent_type: 'security-reviewer', description: 'review the diff',
      agent_id: 'agent-1', child_session_id: 'ses_1', model: 'claude-opus-5', agent_status: 'running',
      tool_status: 'in_progress', total_tokens: 48211n, tool_use_count: 7n, duration_ms: 91234n,
      settled_at: null, updated_at: '2026-08-12 09:00:00',
    });
  });

  it('a non-empty later value replaces the stored one (last committed frame wins)', async () => {
    const c = await toolCall('replace', { status: 'pending', parent_tool_call_id: 'toolu_p1', subagent: full });
    await c.frame({
      status: 'in_progress', parent_tool_call_id: 'toolu_p2',
      subagent: {
        description: 'second description', subagent_type: 'explorer', status: 'completed', agent_id: 'agent-2',
        model: 'claude-sonnet-5', child_session_id: 'ses_2', total_tokens: 275717, tool_use_count: 12, duration_ms: 1,
      },
    }, '2026-08-12 09:00:09');
    const { id, ...row } = await rowOf(c.call);
    expect(row).toEqual({
      task_session_id: c.session, task_id: c.task, turn_id: c.turn, tool_call_id: c.call,
      agent_execution_id: 'unknown', parent_tool_call_id: 'toolu_p2', subagent_type: 'explorer',
      description: 'second description', agent_id: 'agent-2', child_session_id: 'ses_2', model: 'claude-sonnet-5',
      agent_status: 'completed', tool_status: 'in_progress', is_async: 0,
      total_tokens: 275717n, tool_use_count: 12n, duration_ms: 1n,
      source: 'live', observed_at: '2026-08-12 09:00:00', settled_at: null, updated_at: '2026-08-12 09:00:09',
    });
  });
});

describe('settlement', () => {
  it('freezes only tool_status and settled_at: a later failed stays completed, a later model still lands', async () => {
    const c = await toolCall('settle', { status: 'pending', subagent: { status: 'async_launched', model: 'm-1' } });
    await c.frame({ status: 'completed', subagent: { status: 'completed', model: 'm-1', total_tokens: 10 } },
      '2026-08-12 09:01:00.250000');
    await c.frame({
      status: 'failed',
      subagent: { status: 'errored', model: 'm-2', total_tokens: 20, tool_use_count: 3, duration_ms: 400, agent_id: 'late' },
    }, '2026-08-12 09:02:00');
    const { id, ...row } = await rowOf(c.call);
    expect(row).toEqual({
      task_session_id: c.session, task_id: c.task, turn_id: c.turn, tool_call_id: c.call,
      agent_execution_id: 'unknown', parent_tool_call_id: null, subagent_type: null, description: null,
      agent_id: 'late', child_session_id: null, model: 'm-2', agent_status: 'errored',
      tool_status: 'completed', is_async: 0, total_tokens: 20n, tool_use_count: 3n, duration_ms: 400n,
      source: 'live', observed_at: '2026-08-12 09:00:00', settled_at: '2026-08-12 09:01:00.25',
      updated_at: '2026-08-12 09:02:00',
    });
  });

  it('settled_at is the message updated_at of the first terminal write, never a later one', async () => {
    const c = await toolCall('settled_at', { status: 'in_progress' }, '2026-08-12 10:00:00');
    expect((await rowOf(c.call)).settled_at).toBeNull();
    await c.frame({ status: 'success' }, '2026-08-12 10:00:03.000001');
    await c.frame({ status: 'completed' }, '2026-08-12 10:00:04');
    await c.frame({ status: 'in_progress' }, '2026-08-12 10:00:05');
    const row = await rowOf(c.call);
    expect([row.tool_status, row.settled_at, row.updated_at])
      .toEqual(['success', '2026-08-12 10:00:03.000001', '2026-08-12 10:00:05']);
  });

  it('a message first INSERTed already terminal is settled at that write', async () => {
    const c = await toolCall('born_settled', { status: 'cancelled' }, '2026-08-12 11:00:00.5');
    await c.frame({ status: 'completed' }, '2026-08-12 11:00:02');
    const row = await rowOf(c.call);
    expect([row.tool_status, row.settled_at, row.updated_at])
      .toEqual(['cancelled', '2026-08-12 11:00:00.5', '2026-08-12 11:00:02']);
  });

  it('before settlement a non-terminal tool_status replaces and NULL keeps it', async () => {
    const c = await toolCall('pre_settle', { status: 'pending' });
    await c.frame({ status: 'in_progress' }, '2026-08-12 09:00:01');
    await c.frame({}, '2026-08-12 09:00:02');
    const row = await rowOf(c.call);
    expect([row.tool_status, row.settled_at]).toEqual(['in_progress', null]);
  });
});

describe('turn_id', () => {
  it('the first non-NULL turn wins: a later turn does not move the row', async () => {
    const c = await toolCall('turn_first', { status: 'pending' });
    const other = await createTurn(pool, 'public', 'turn_first_other');
    // Same session, another turn: kandev would not do this, the rule must still hold.
    await db.query(`UPDATE task_session_turns SET task_session_id = $1 WHERE id = $2`, [c.session, other.turn]);
    await db.query(`UPDATE task_session_messages SET turn_id = $2, updated_at = '2026-08-12 09:00:04' WHERE id = $1`,
      [c.id, other.turn]);
    const row = await rowOf(c.call);
    expect([row.turn_id, row.updated_at]).toEqual([c.turn, '2026-08-12 09:00:04']);
  });

  it('a stored NULL turn is filled by a later value (on a host whose turn_id may be NULL or empty)', async () => {
    // kandev declares task_session_messages.turn_id NOT NULL with an FK, so its rows always name a turn.
    // Other hosts, and old rows, may hold NULL or '' there (docs/integration.md), which the row records as NULL.
    // This file's own database plays such a host: the fixture's constraints are dropped here only.
    const schema = 'loose_host';
    await db.createHost(schema);
    await db.query(`ALTER TABLE ${schema}.task_session_messages ALTER COLUMN turn_id DROP NOT NULL`);
    await db.query(`ALTER TABLE ${schema}.task_session_messages DROP CONSTRAINT task_session_messages_turn_id_fkey`);
    await db.up(schema);
    const t = await createTurn(pool, schema, 'loose');
    await insertMessage(pool, schema, {
      id: 'msg-empty-turn', session: t.session, task: t.task, turn: '',
      metadata: subagentMetadata({ tool_call_id: 'toolu_empty_turn', status: 'pending' }),
    });
    await db.query(`INSERT INTO ${schema}.task_session_messages
        (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
      VALUES ('msg-null-turn', $1, $2, NULL, '', 'tool_call', $3, '2026-08-12 09:00:00', '2026-08-12 09:00:00')`,
      [t.session, t.task, subagentMetadata({ tool_call_id: 'toolu_null_turn', status: 'pending' })]);
    expect((await rowOf('toolu_empty_turn', schema)).turn_id).toBeNull();
    expect((await rowOf('toolu_null_turn', schema)).turn_id).toBeNull();

    // A frame still without a turn keeps NULL; the first one with a turn fills it; later ones do not move it.
    await updateMessage(pool, schema, 'msg-null-turn',
      subagentMetadata({ tool_call_id: 'toolu_null_turn', status: 'in_progress' }), '2026-08-12 09:00:01');
    expect((await rowOf('toolu_null_turn', schema)).turn_id).toBeNull();
    for (const [id, call] of [['msg-empty-turn', 'toolu_empty_turn'], ['msg-null-turn', 'toolu_null_turn']]) {
      await db.query(`UPDATE ${schema}.task_session_messages SET turn_id = $2, updated_at = '2026-08-12 09:00:02' WHERE id = $1`, [id, t.turn]);
      await db.query(`UPDATE ${schema}.task_session_messages SET turn_id = 'turn-later', updated_at = '2026-08-12 09:00:03' WHERE id = $1`, [id]);
      await db.query(`UPDATE ${schema}.task_session_messages SET turn_id = '', updated_at = '2026-08-12 09:00:04' WHERE id = $1`, [id]);
      const row = await rowOf(call, schema);
      expect([row.turn_id, row.updated_at]).toEqual([t.turn, '2026-08-12 09:00:04']);
    }
  });
});

describe('is_async', () => {
  it('is sticky at 1: neither an absent nor a false flag clears it', async () => {
    const c = await toolCall('async_sticky', { status: 'pending', subagent: { is_async: false } });
    expect((await rowOf(c.call)).is_async).toBe(0);
    await c.frame({ subagent: { is_async: true } }, '2026-08-12 09:00:01');
    expect((await rowOf(c.call)).is_async).toBe(1);
    await c.frame({ subagent: {} }, '2026-08-12 09:00:02');
    expect((await rowOf(c.call)).is_async).toBe(1);
    await c.frame({ subagent: { is_async: false } }, '2026-08-12 09:00:03');
    await c.frame({ subagent: { is_async: 0 } }, '2026-08-12 09:00:04');
    expect((await rowOf(c.call)).is_async).toBe(1);
  });
});

describe('write-once columns', () => {
  it('id, task_id, observed_at and agent_execution_id never change on conflict', async () => {
    const c = await toolCall('write_once', { status: 'pending' }, '2026-08-12 09:00:00.1');
    const before = await rowOf(c.call);
    const otherTask = await createTurn(pool, 'public', 'write_once_other');
    // The message itself changes its task and creation time: the row keeps what it first observed.
    await db.query(`UPDATE task_session_messages
                       SET task_id = $2, created_at = '2026-08-13 00:00:00', updated_at = '2026-08-13 00:00:01',
                           metadata = $3
                     WHERE id = $1`,
      [c.id, otherTask.task, subagentMetadata({ tool_call_id: c.call, status: 'in_progress' })]);
    expect(await rowOf(c.call)).toEqual({
      ...before, tool_status: 'in_progress', updated_at: '2026-08-13 00:00:01',
    });
    expect([before.task_id, before.observed_at, before.agent_execution_id, before.source])
      .toEqual([c.task, '2026-08-12 09:00:00.1', 'unknown', 'live']);
  });

  it("source stays 'backfill' when live frames later update a backfilled row", async () => {
    const schema = 'history';
    await db.createHost(schema);
    const t = await createTurn(pool, schema, 'hist');
    await insertMessage(pool, schema, {
      id: 'msg-hist', session: t.session, task: t.task, turn: t.turn,
      created_at: '2026-08-01 08:00:00', updated_at: '2026-08-01 08:00:02',
      metadata: subagentMetadata({ tool_call_id: 'toolu_hist', status: 'pending', subagent: { model: 'old' } }),
    });
    await db.up(schema);
    const before = await rowOf('toolu_hist', schema);
    expect([before.source, before.observed_at, before.agent_execution_id])
      .toEqual(['backfill', '2026-08-01 08:00:00', 'unknown']);
    await updateMessage(pool, schema, 'msg-hist',
      subagentMetadata({ tool_call_id: 'toolu_hist', status: 'completed', subagent: { model: 'new' } }),
      '2026-08-12 09:00:00');
    expect(await rowOf('toolu_hist', schema)).toEqual({
      ...before, model: 'new', tool_status: 'completed',
      settled_at: '2026-08-12 09:00:00', updated_at: '2026-08-12 09:00:00',
    });
  });
});

describe('updated_at', () => {
  it('never moves backwards; the older frame still merges its values', async () => {
    const c = await toolCall('clock', { status: 'pending', subagent: { model: 'first' } });
    await c.frame({ subagent: { model: 'second' } }, '2026-08-12 09:00:05');
    await c.frame({ subagent: { model: 'third' } }, '2026-08-12 09:00:03');
    const row = await rowOf(c.call);
    expect([row.model, row.updated_at]).toEqual(['third', '2026-08-12 09:00:05']);
    await c.frame({ subagent: { model: 'fourth' } }, '2026-08-12 09:00:05.000001');
    const later = await rowOf(c.call);
    expect([later.model, later.updated_at]).toEqual(['fourth', '2026-08-12 09:00:05.000001']);
  });
});

describe('metrics', () => {
  it('a later 0, negative, missing or malformed metric never blanks a learned value', async () => {
    const c = await toolCall('metrics_keep', {
      status: 'completed', subagent: { total_tokens: 1200, tool_use_count: 9, duration_ms: 3000 },
    });
    const frames: Record<string, unknown>[] = [
      { total_tokens: 0, duration_ms: 0 },
      { total_tokens: -5, tool_use_count: -1, duration_ms: -3000 },
      { total_tokens: '1500', tool_use_count: 1.5, duration_ms: true },
      { total_tokens: null, tool_use_count: null, duration_ms: null },
      {},
    ];
    let second = 1;
    for (const subagent of frames) {
      await c.frame({ status: 'completed', subagent }, `2026-08-12 09:00:0${second++}`);
      const row = await rowOf(c.call);
      expect([row.total_tokens, row.tool_use_count, row.duration_ms]).toEqual([1200n, 9n, 3000n]);
    }
  });

  it('tool_use_count 0 is stored as 0, kept over NULL, replaced by a later value (and a later 0 replaces too)', async () => {
    const c = await toolCall('tool_count', { status: 'pending', subagent: { tool_use_count: 0 } });
    expect((await rowOf(c.call)).tool_use_count).toBe(0n);
    await c.frame({ subagent: {} }, '2026-08-12 09:00:01');
    expect((await rowOf(c.call)).tool_use_count).toBe(0n);
    await c.frame({ subagent: { tool_use_count: -2 } }, '2026-08-12 09:00:02');
    expect((await rowOf(c.call)).tool_use_count).toBe(0n);
    await c.frame({ subagent: { tool_use_count: 4 } }, '2026-08-12 09:00:03');
    expect((await rowOf(c.call)).tool_use_count).toBe(4n);
    // 0 is a reported count, not "not reported": a non-NULL incoming value replaces (docs/decisions.md#merge-and-identity).
    await c.frame({ subagent: { tool_use_count: 0 } }, '2026-08-12 09:00:04');
    expect((await rowOf(c.call)).tool_use_count).toBe(0n);
  });

  it('total_tokens and duration_ms 0 are never stored, so a first frame with 0 leaves them NULL until reported', async () => {
    const c = await toolCall('zero_tokens', { status: 'pending', subagent: { total_tokens: 0, duration_ms: 0 } });
    let row = await rowOf(c.call);
    expect([row.total_tokens, row.duration_ms]).toEqual([null, null]);
    await c.frame({ subagent: { total_tokens: 42, duration_ms: 7 } }, '2026-08-12 09:00:01');
    row = await rowOf(c.call);
    expect([row.total_tokens, row.duration_ms]).toEqual([42n, 7n]);
  });
});
