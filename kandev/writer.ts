// kandev's own subagent writer, as it ships (kandev >= 0.89): after the message write commits
// (`UpdateMessage`, or the advisory-locked INSERT), the Go process upserts the row of its own
// task_session_subagents table (kandev/schema/kandev-subagents-table.sql) with `ExecContext`: a separate
// autocommit statement, so a subagent frame costs two commits. It is the peer the benchmarks hold the
// trigger against. The values are what the Go side decoded from the frame (SubagentValues of the traffic
// model); the merge keeps what earlier frames reported, like the trigger's, so both store the same facts.
import type pg from 'pg';
import { randomUUID } from 'node:crypto';
import { quoteIdent } from '#sql';
import { executeWrite, type WriteTarget } from './traffic-write.js';
import type { Write } from './traffic-plan.js';
import { isTerminalToolStatus } from './terminal-statuses.js';
import { utcTimestamp } from '../src/timestamp.js';

/** kandev's upsert into its own table: one prepared statement. */
export function kandevUpsert(schema: string) {
  const S = quoteIdent(schema);
  return {
    name: `kandev-subagent-upsert-${schema}`,
    text: `INSERT INTO ${S}.task_session_subagents AS s (
             id, task_session_id, task_id, turn_id, tool_call_id, agent_execution_id,
             parent_tool_call_id, subagent_type, description, agent_id, child_session_id, model,
             agent_status, tool_status, is_async, total_tokens, tool_use_count, duration_ms,
             source, observed_at, settled_at, updated_at)
           VALUES ($1, $2, $3, nullif($4, ''), $5, 'unknown', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                   'live', $18, $19, $20)
           ON CONFLICT (task_session_id, agent_execution_id, tool_call_id) DO UPDATE SET
             turn_id = coalesce(s.turn_id, EXCLUDED.turn_id),
             parent_tool_call_id = coalesce(EXCLUDED.parent_tool_call_id, s.parent_tool_call_id),
             subagent_type = coalesce(EXCLUDED.subagent_type, s.subagent_type),
             description = coalesce(EXCLUDED.description, s.description),
             agent_id = coalesce(EXCLUDED.agent_id, s.agent_id),
             child_session_id = coalesce(EXCLUDED.child_session_id, s.child_session_id),
             model = coalesce(EXCLUDED.model, s.model),
             agent_status = coalesce(EXCLUDED.agent_status, s.agent_status),
             total_tokens = coalesce(EXCLUDED.total_tokens, s.total_tokens),
             tool_use_count = coalesce(EXCLUDED.tool_use_count, s.tool_use_count),
             duration_ms = coalesce(EXCLUDED.duration_ms, s.duration_ms),
             tool_status = CASE WHEN s.settled_at IS NOT NULL THEN s.tool_status ELSE EXCLUDED.tool_status END,
             settled_at = coalesce(s.settled_at, EXCLUDED.settled_at),
             is_async = greatest(s.is_async, EXCLUDED.is_async),
             updated_at = greatest(s.updated_at, EXCLUDED.updated_at)`,
  };
}

/**
 * One planned write as kandev with its own writer issues it: the message write (its own transaction or
 * autocommit, executeWrite), then, for a qualifying subagent frame, the upsert as a second autocommit
 * statement. `createdAt` is the message's creation time (observed_at), known to kandev from the row.
 */
export async function writeWithKandevWriter(client: pg.ClientBase, w: Write, t: WriteTarget & { createdAt?: string }): Promise<void> {
  const at = t.at ?? utcTimestamp();
  await executeWrite(client, w, { ...t, at });
  if (w.op === 'complete_pending' || w.op === 'delete_message' || !w.qualifies || !w.subagent || w.noIdentity) return;
  const v = w.subagent;
  await client.query({
    ...kandevUpsert(t.schema),
    values: [randomUUID(), t.session, t.task, t.turn, v.tool_call_id, v.parent_tool_call_id, v.subagent_type, v.description,
      v.agent_id, v.child_session_id, v.model, v.agent_status, v.tool_status, v.is_async, v.total_tokens, v.tool_use_count,
      v.duration_ms, t.createdAt ?? at, isTerminalToolStatus(v.tool_status) ? at : null, at],
  });
}
