// docs/integration.md: the execution that emitted a frame, from metadata.agent_execution_id (a non-empty JSON
// string) or else the transaction-local setting subagent_context.agent_execution_id, else 'unknown'.
// A row never changes its execution; a late frame of an old execution must not touch a newer one's row.
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';

const db = await freshDatabase('execution_identity', { from: 'installed' });
const pool = db.pool;
const client = await db.connect();

async function rowsOf(session: string) {
  const { rows } = await db.query(
    `SELECT * FROM task_session_subagents WHERE task_session_id = $1 ORDER BY agent_execution_id`, [session]);
  return rows;
}

async function stats() {
  const { rows: [s] } = await db.query(`SELECT * FROM subagent_context_stats()`);
  return s as Record<string, bigint>;
}

/** Runs fn in one transaction on a dedicated connection, with the execution setting when given. */
async function inExecution<T>(execution: string | null, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    if (execution !== null) await client.query(`SELECT set_config('subagent_context.agent_execution_id', $1, true)`, [execution]);
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

describe('two executions reusing one tool_call_id', () => {
  it('via metadata: two rows, and a late frame of the old execution leaves the newer row unchanged in every column', async () => {
    const t = await createTurn(pool, 'public', 'meta');
    // Execution 1 runs its Task call to completion.
    await insertMessage(pool, 'public', {
      id: 'meta-m1', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:00:00', updated_at: '2026-08-12 09:00:00',
      metadata: subagentMetadata({ tool_call_id: 'toolu_reused', agent_execution_id: 'exec-1', status: 'pending', subagent: { model: 'm-old' } }),
    });
    // Execution 2 (a restarted agent) reuses the tool call id on a new message.
    await insertMessage(pool, 'public', {
      id: 'meta-m2', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:05:00', updated_at: '2026-08-12 09:05:01',
      metadata: subagentMetadata({
        tool_call_id: 'toolu_reused', agent_execution_id: 'exec-2', status: 'completed',
        subagent: { model: 'm-new', status: 'completed', total_tokens: 500, tool_use_count: 4, duration_ms: 80, agent_id: 'a-2' },
      }),
    });
    const rows = await rowsOf(t.session);
    expect(rows.map((r) => [r.agent_execution_id, r.tool_call_id, r.model, r.observed_at])).toEqual([
      ['exec-1', 'toolu_reused', 'm-old', '2026-08-12 09:00:00'],
      ['exec-2', 'toolu_reused', 'm-new', '2026-08-12 09:05:00'],
    ]);
    const newer = rows[1];

    // A late frame of execution 1, written after execution 2's, with values that would change every column.
    await updateMessage(pool, 'public', 'meta-m1', subagentMetadata({
      tool_call_id: 'toolu_reused', agent_execution_id: 'exec-1', status: 'failed', parent_tool_call_id: 'toolu_p',
      subagent: {
        model: 'm-late', status: 'killed', total_tokens: 9, tool_use_count: 9, duration_ms: 9, agent_id: 'a-1',
        subagent_type: 'x', description: 'late', child_session_id: 'ses_late', is_async: true,
      },
    }), '2026-08-12 09:10:00');
    const after = await rowsOf(t.session);
    expect(after[1]).toEqual(newer);
    expect(after[0]).toMatchObject({
      agent_execution_id: 'exec-1', model: 'm-late', tool_status: 'failed', settled_at: '2026-08-12 09:10:00',
      is_async: 1, updated_at: '2026-08-12 09:10:00',
    });
  });

  it('via set_config inside a transaction: the same, and a frame never moves a row to another execution', async () => {
    const t = await createTurn(pool, 'public', 'setting');
    const frame = (status: string, model: string) =>
      subagentMetadata({ tool_call_id: 'toolu_reused', status, subagent: { model } });
    await inExecution('exec-1', (c) => insertMessage(c, 'public', {
      id: 'set-m1', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:00:00', metadata: frame('pending', 'm-old'),
    }));
    await inExecution('exec-2', (c) => insertMessage(c, 'public', {
      id: 'set-m2', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:05:00', metadata: frame('completed', 'm-new'),
    }));
    const rows = await rowsOf(t.session);
    expect(rows.map((r) => [r.agent_execution_id, r.model, r.tool_status, r.settled_at])).toEqual([
      ['exec-1', 'm-old', 'pending', null],
      ['exec-2', 'm-new', 'completed', '2026-08-12 09:05:00'],
    ]);
    const newer = rows[1];

    // The old execution's late frame, on its own message.
    await inExecution('exec-1', (c) => updateMessage(c, 'public', 'set-m1', frame('failed', 'm-late'), '2026-08-12 09:10:00'));
    // The new execution's message updated under the old execution's id: it addresses exec-1's row.
    await inExecution('exec-1', (c) => updateMessage(c, 'public', 'set-m2', frame('cancelled', 'm-stray'), '2026-08-12 09:11:00'));
    const after = await rowsOf(t.session);
    expect(after).toHaveLength(2);
    expect(after[1]).toEqual(newer);
    expect([after[0].id, after[0].agent_execution_id, after[0].model, after[0].tool_status, after[0].settled_at, after[0].observed_at])
      .toEqual([rows[0].id, 'exec-1', 'm-stray', 'failed', '2026-08-12 09:10:00', '2026-08-12 09:00:00']);

    // A third execution on the same message: a third row, nothing else touched.
    await inExecution('exec-3', (c) => updateMessage(c, 'public', 'set-m2', frame('pending', 'm-3'), '2026-08-12 09:12:00'));
    const third = await rowsOf(t.session);
    expect(third.map((r) => r.agent_execution_id)).toEqual(['exec-1', 'exec-2', 'exec-3']);
    expect(third.slice(0, 2)).toEqual(after);
    expect([third[2].observed_at, third[2].model]).toEqual(['2026-08-12 09:05:00', 'm-3']);
  });
});

describe('which execution id a frame gets', () => {
  const cases: Array<[string, unknown, string | null, string]> = [
    ['metadata wins over the setting', 'exec-meta', 'exec-setting', 'exec-meta'],
    ['metadata alone', 'exec-meta', null, 'exec-meta'],
    ['setting alone', undefined, 'exec-setting', 'exec-setting'],
    ["'' in metadata falls back to the setting", '', 'exec-setting', 'exec-setting'],
    ['a number in metadata falls back to the setting', 42, 'exec-setting', 'exec-setting'],
    ['true in metadata falls back to the setting', true, 'exec-setting', 'exec-setting'],
    ['an object in metadata falls back to the setting', { id: 'x' }, 'exec-setting', 'exec-setting'],
    ['JSON null in metadata falls back to the setting', null, 'exec-setting', 'exec-setting'],
    ["'' in metadata and no setting is 'unknown'", '', null, 'unknown'],
    ["a number in metadata and no setting is 'unknown'", 7, null, 'unknown'],
    ["an empty setting is 'unknown'", undefined, '', 'unknown'],
    ["no id anywhere is 'unknown'", undefined, null, 'unknown'],
  ];

  it.each(cases.map((c, i) => [...c, i] as const))('%s', async (label, metaId, setting, expected, i) => {
    const t = await createTurn(pool, 'public', `which${i}`);
    const doc = JSON.parse(subagentMetadata({ tool_call_id: `toolu_which_${i}`, status: 'pending' }));
    if (metaId !== undefined) doc.agent_execution_id = metaId;
    const before = await stats();
    await inExecution(setting, (c) => insertMessage(c, 'public', {
      id: `which-m${i}`, session: t.session, task: t.task, turn: t.turn, metadata: JSON.stringify(doc),
    }));
    const rows = await rowsOf(t.session);
    expect(rows.map((r) => r.agent_execution_id)).toEqual([expected]);
    // Stats: every one persisted; unknown_execution moves exactly for rows stored under 'unknown'.
    const after = await stats();
    expect({
      attempted: after.attempted - before.attempted,
      persisted: after.persisted - before.persisted,
      unknown_execution: after.unknown_execution - before.unknown_execution,
      skipped_no_identity: after.skipped_no_identity - before.skipped_no_identity,
      failed: after.failed - before.failed,
    }).toEqual({
      attempted: 1n, persisted: 1n, unknown_execution: expected === 'unknown' ? 1n : 0n, skipped_no_identity: 0n, failed: 0n,
    });
  });
});

describe('the setting is transaction-local', () => {
  it('the next transaction on the same connection gets unknown', async () => {
    const t = await createTurn(pool, 'public', 'local');
    const frame = (n: number) => subagentMetadata({ tool_call_id: `toolu_local_${n}`, status: 'pending' });
    await inExecution('exec-local', (c) => insertMessage(c, 'public', {
      id: 'local-m1', session: t.session, task: t.task, turn: t.turn, metadata: frame(1),
    }));
    // Same connection, next transaction, no setting.
    await inExecution(null, (c) => insertMessage(c, 'public', {
      id: 'local-m2', session: t.session, task: t.task, turn: t.turn, metadata: frame(2),
    }));
    // Autocommit: set_config(..., true) in its own statement ends with that statement's transaction.
    await client.query(`SELECT set_config('subagent_context.agent_execution_id', 'exec-gone', true)`);
    await insertMessage(client, 'public', { id: 'local-m3', session: t.session, task: t.task, turn: t.turn, metadata: frame(3) });
    // A rolled-back transaction's setting does not leak either.
    await client.query('BEGIN');
    await client.query(`SELECT set_config('subagent_context.agent_execution_id', 'exec-rolled-back', true)`);
    await client.query('ROLLBACK');
    await insertMessage(client, 'public', { id: 'local-m4', session: t.session, task: t.task, turn: t.turn, metadata: frame(4) });

    const { rows } = await db.query(
      `SELECT tool_call_id, agent_execution_id FROM task_session_subagents WHERE task_session_id = $1 ORDER BY tool_call_id`, [t.session]);
    expect(rows).toEqual([
      { tool_call_id: 'toolu_local_1', agent_execution_id: 'exec-local' },
      { tool_call_id: 'toolu_local_2', agent_execution_id: 'unknown' },
      { tool_call_id: 'toolu_local_3', agent_execution_id: 'unknown' },
      { tool_call_id: 'toolu_local_4', agent_execution_id: 'unknown' },
    ]);
  });

  it('two frames of different executions in one transaction: set_config mid-transaction switches the row addressed', async () => {
    const t = await createTurn(pool, 'public', 'switch');
    const frame = (status: string) => subagentMetadata({ tool_call_id: 'toolu_switch', status });
    await inExecution('exec-a', async (c) => {
      await insertMessage(c, 'public', { id: 'switch-m1', session: t.session, task: t.task, turn: t.turn, metadata: frame('pending') });
      await c.query(`SELECT set_config('subagent_context.agent_execution_id', 'exec-b', true)`);
      await updateMessage(c, 'public', 'switch-m1', frame('completed'), '2026-08-12 09:00:05');
    });
    const rows = await rowsOf(t.session);
    expect(rows.map((r) => [r.agent_execution_id, r.tool_status, r.settled_at])).toEqual([
      ['exec-a', 'pending', null],
      ['exec-b', 'completed', '2026-08-12 09:00:05'],
    ]);
  });
});
