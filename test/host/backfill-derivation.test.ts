// The backfill (docs/health.md) derives history written before installation through the same derivation as
// live capture: one row per (session, tool call) from the newest message, source 'backfill',
// execution 'unknown' unless the metadata names one, and a row that already exists always wins.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { backfill } from '../../src/install.js';
import { ROW_COLUMNS as ROWS, selectList } from '../model/subagent-table.js';

const db = await freshDatabase('backfill_derivation');

const ROW_COLUMNS = selectList(ROWS);

/** Defaults of a backfilled row of session/task/turn `h`; each case overrides what it is about. */
function backfilled(t: { session: string; task: string; turn: string }, over: Record<string, unknown>) {
  return {
    task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: null,
    agent_execution_id: 'unknown', parent_tool_call_id: null, subagent_type: null, description: null,
    agent_id: null, child_session_id: null, model: null, agent_status: null, tool_status: null,
    is_async: 0, total_tokens: null, tool_use_count: null, duration_ms: null, source: 'backfill',
    observed_at: null, settled_at: null, updated_at: null, ...over,
  };
}

describe('history written before installation', async () => {
  await db.createHost();
  const c = db.pool;
  const h = await createTurn(c, 'public', 'h');
  const msg = (id: string, metadata: string | null, created_at: string, updated_at = created_at,
               extra: { task?: string | null } = {}) =>
    insertMessage(c, 'public', { id, session: h.session, task: 'task' in extra ? extra.task : h.task,
                                 turn: h.turn, metadata, created_at, updated_at });

  // 75% of real traffic: a background dispatch that never reports usage.
  await msg('m-async', subagentMetadata({ tool_call_id: 'toolu_async', status: 'pending', subagent: {
    description: 'review the diff', subagent_type: 'security-reviewer', status: 'async_launched',
    agent_id: 'a1', model: 'claude-opus-5[1m]', is_async: true, prompt: 'p', result_text: 'r' } }),
    '2026-08-12 09:00:00.000001', '2026-08-12 09:00:02');
  // Completed with a reported 0 tool uses: 0 stays 0; terminal status settles at updated_at.
  await msg('m-zero', subagentMetadata({ tool_call_id: 'toolu_zero', status: 'completed', subagent: {
    subagent_type: 'explorer', status: 'completed', total_tokens: 275717, tool_use_count: 0,
    duration_ms: 91234, model: 'claude-opus-5' } }),
    '2026-08-12 09:01:00', '2026-08-12 09:03:00.654321');
  // Negative and malformed metrics, '' text fields: all NULL. Non-terminal status: not settled.
  await msg('m-bad', subagentMetadata({ tool_call_id: 'toolu_bad', status: 'in_progress', subagent: {
    subagent_type: '', description: '', model: '', status: '', total_tokens: -5, tool_use_count: -1,
    duration_ms: '' } }), '2026-08-12 09:02:00', '2026-08-12 09:02:30');
  // A subagent spawned by a subagent; its terminal status is 'failed'. History takes the execution id
  // the metadata names (docs/health.md), like live capture.
  await msg('m-nested', subagentMetadata({ tool_call_id: 'toolu_child', status: 'failed',
    parent_tool_call_id: 'toolu_zero', agent_execution_id: 'exec-7',
    subagent: { subagent_type: 'test-writer', status: 'started', child_session_id: 'ses_42' } }),
    '2026-08-12 09:04:00', '2026-08-12 09:05:00');
  // No identity: skipped, no error.
  await msg('m-no-task', subagentMetadata({ tool_call_id: 'toolu_nt', status: 'completed' }), '2026-08-12 09:06:00',
    undefined, { task: null });
  await msg('m-empty-task', subagentMetadata({ tool_call_id: 'toolu_et', status: 'completed' }), '2026-08-12 09:06:01',
    undefined, { task: '' });
  await msg('m-no-call', subagentMetadata({ status: 'completed' }), '2026-08-12 09:06:02');
  await msg('m-empty-call', subagentMetadata({ tool_call_id: '', status: 'completed' }), '2026-08-12 09:06:03');
  // Three messages for one key: the newest created_at wins, then the greatest id.
  await msg('dup-c', subagentMetadata({ tool_call_id: 'toolu_dup', subagent: { description: 'oldest' } }),
    '2026-08-12 09:07:00');
  await msg('dup-a', subagentMetadata({ tool_call_id: 'toolu_dup', subagent: { description: 'newest, smaller id' } }),
    '2026-08-12 09:08:00');
  await msg('dup-b', subagentMetadata({ tool_call_id: 'toolu_dup', subagent: { description: 'newest, greatest id' } }),
    '2026-08-12 09:08:00', '2026-08-12 09:08:09');
  // Malformed metadata beside the valid rows: none qualifies, the statement completes.
  for (const [id, metadata] of [['bad-empty', ''], ['bad-null-text', 'null'], ['bad-sql-null', null],
    ['bad-truncated', '{"tool_call_id":"toolu_trunc","normalized":{"kind":"subagent_task"'], ['bad-array', '[]'],
    ['bad-array-kind', '[{"tool_call_id":"toolu_arr","normalized":{"kind":"subagent_task"}}]'],
    ['bad-string', '"subagent_task"'], ['bad-kind', '{"tool_call_id":"toolu_k","normalized":{"kind":"Subagent_task"}}'],
    ['bad-nul-escape', '{"tool_call_id":"toolu_nul\\u0000","normalized":{"kind":"subagent_task"}}']] as const) {
    if (await db.hostRefuses(metadata)) continue; // kandev's own index refuses it: no such history there
    await msg(id, metadata, '2026-08-12 09:09:00');
  }
  // A kind spelled only with a JSON escape is no subagent call (docs/decisions.md#derivation): no row.
  await msg('m-escaped', '{"tool_call_id":"toolu_esc","normalized":{"kind":"subagent\\u005ftask"}}', '2026-08-12 09:10:00');

  const result = await db.up();

  it('activates, storing one row per qualifying (session, tool call) with full identity', () => {
    expect(result.backfill.status).toBe('activated');
    expect(result.backfill.inserted).toBe(5);
    expect(result.backfill.failure).toBeNull();
    expect(result.backfill.backfill_through).toBe('2026-08-12T09:08:00.000000000Z');
  });

  it('derives each row exactly as live capture would, marked backfill, under the metadata\'s execution id or unknown', async () => {
    const { rows } = await db.query(`SELECT ${ROW_COLUMNS} FROM task_session_subagents ORDER BY tool_call_id`);
    expect(rows).toEqual([
      backfilled(h, { tool_call_id: 'toolu_async', subagent_type: 'security-reviewer', description: 'review the diff',
        agent_id: 'a1', model: 'claude-opus-5[1m]', agent_status: 'async_launched', tool_status: 'pending', is_async: 1,
        observed_at: '2026-08-12 09:00:00.000001', updated_at: '2026-08-12 09:00:02' }),
      backfilled(h, { tool_call_id: 'toolu_bad', tool_status: 'in_progress',
        observed_at: '2026-08-12 09:02:00', updated_at: '2026-08-12 09:02:30' }),
      backfilled(h, { tool_call_id: 'toolu_child', agent_execution_id: 'exec-7', parent_tool_call_id: 'toolu_zero', subagent_type: 'test-writer',
        child_session_id: 'ses_42', agent_status: 'started', tool_status: 'failed',
        observed_at: '2026-08-12 09:04:00', settled_at: '2026-08-12 09:05:00', updated_at: '2026-08-12 09:05:00' }),
      backfilled(h, { tool_call_id: 'toolu_dup', description: 'newest, greatest id',
        observed_at: '2026-08-12 09:08:00', updated_at: '2026-08-12 09:08:09' }),
      backfilled(h, { tool_call_id: 'toolu_zero', subagent_type: 'explorer', model: 'claude-opus-5',
        agent_status: 'completed', tool_status: 'completed', total_tokens: 275717n, tool_use_count: 0n,
        duration_ms: 91234n, observed_at: '2026-08-12 09:01:00', settled_at: '2026-08-12 09:03:00.654321',
        updated_at: '2026-08-12 09:03:00.654321' }),
    ]);
  });

  it('writes nothing for the skipped and malformed messages (and records no failure)', async () => {
    const { rows } = await db.query(`SELECT count(*) AS n FROM subagent_context_failures`);
    expect(rows[0].n).toBe(0n);
  });
});

describe('a live row that exists before the backfill', async () => {
  await db.createHost('live');
  const c = db.pool;
  const t = await createTurn(c, 'live', 'l');
  // History, newer than the live write of the same key, and one other key only history knows.
  await insertMessage(c, 'live', { id: 'm-history', session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-08-12 10:00:00', metadata: subagentMetadata({ tool_call_id: 'toolu_k', status: 'completed',
      subagent: { description: 'from history', total_tokens: 10 } }) });
  await insertMessage(c, 'live', { id: 'm-other', session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-08-12 08:00:00', metadata: subagentMetadata({ tool_call_id: 'toolu_other' }) });
  await db.install('live');
  await insertMessage(c, 'live', { id: 'm-live', session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-08-12 09:00:00', metadata: subagentMetadata({ tool_call_id: 'toolu_k', status: 'pending',
      subagent: { description: 'live' } }) });

  it('installs without backfilling when only the install migration runs', async () => {
    const { rows } = await db.query(`SELECT name FROM live.subagent_context_migrations ORDER BY id`);
    expect(rows.map((r) => r.name)).toEqual(['1764680000000_install-capture']);
    const keys = await db.query(`SELECT count(*) AS n FROM live.kandev_meta`);
    expect(keys.rows[0].n).toBe(0n);
  });

  it('keeps the live row in every column and adds only the missing key', async () => {
    const before = await db.query(`SELECT * FROM live.task_session_subagents WHERE tool_call_id = 'toolu_k'`);
    const client = await db.connect();
    const result = await backfill(client, 'live');
    expect(result.status).toBe('activated');
    expect(result.inserted).toBe(1);
    // backfill_through covers every qualifying message, including the one the live row already holds.
    expect(result.backfill_through).toBe('2026-08-12T10:00:00.000000000Z');
    const { rows } = await db.query(
      `SELECT tool_call_id, description, tool_status, total_tokens, source, observed_at
         FROM live.task_session_subagents ORDER BY tool_call_id`);
    expect(rows).toEqual([
      { tool_call_id: 'toolu_k', description: 'live', tool_status: 'pending', total_tokens: null, source: 'live',
        observed_at: '2026-08-12 09:00:00' },
      { tool_call_id: 'toolu_other', description: null, tool_status: null, total_tokens: null, source: 'backfill',
        observed_at: '2026-08-12 08:00:00' },
    ]);
    const after = await db.query(`SELECT * FROM live.task_session_subagents WHERE tool_call_id = 'toolu_k'`);
    expect(after.rows).toEqual(before.rows);
  });
});
