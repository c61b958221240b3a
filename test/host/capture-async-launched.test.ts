// The most common shape (75% of real traffic): a Claude background dispatch that never reports usage.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';

const db = await freshDatabase('async_launched', { from: 'installed' });

describe('an async_launched subagent message', () => {
  it('maps every column, leaves the unreported metrics NULL (not 0)', async () => {
    const t = await createTurn(db.pool, 'public', 'a');
    await insertMessage(db.pool, 'public', {
      id: 'm1', session: t.session, task: t.task, turn: t.turn,
      created_at: '2026-08-12 09:00:00.123456', updated_at: '2026-08-12 09:00:01.5',
      metadata: subagentMetadata({
        tool_call_id: 'toolu_01abc', status: 'pending', parent_tool_call_id: 'toolu_00parent',
        subagent: {
          description: 'review the diff', prompt: 'please review', subagent_type: 'security-reviewer',
          status: 'async_launched', agent_id: 'a1b2', model: 'claude-opus-5[1m]', is_async: true,
          result_text: 'not stored', output_file: '/tmp/not-stored',
        },
      }),
    });
    const { rows } = await db.query(`SELECT * FROM task_session_subagents`);
    expect(rows).toHaveLength(1);
    const { id, ...row } = rows[0];
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(row).toEqual({
      task_session_id: t.session,
      task_id: t.task,
      turn_id: t.turn,
      tool_call_id: 'toolu_01abc',
      agent_execution_id: 'unknown',
      parent_tool_call_id: 'toolu_00parent',
      subagent_type: 'security-reviewer',
      description: 'review the diff',
      agent_id: 'a1b2',
      child_session_id: null,
      model: 'claude-opus-5[1m]',
      agent_status: 'async_launched',
      tool_status: 'pending',
      is_async: 1,
      total_tokens: null,
      tool_use_count: null,
      duration_ms: null,
      source: 'live',
      observed_at: '2026-08-12 09:00:00.123456',
      settled_at: null,
      updated_at: '2026-08-12 09:00:01.5',
    });
  });
});
