// A row of task_session_subagents (all but the generated id), written once for the traffic model and
// the tests' reference model. Count is how the metrics are held: number where the values are planned,
// bigint where they are read back exactly. Timestamps as PostgreSQL prints `timestamp`.
export interface SubagentRow<Count = bigint> {
  task_session_id: string;
  task_id: string;
  turn_id: string | null;
  tool_call_id: string;
  agent_execution_id: string;
  parent_tool_call_id: string | null;
  subagent_type: string | null;
  description: string | null;
  agent_id: string | null;
  child_session_id: string | null;
  model: string | null;
  agent_status: string | null;
  tool_status: string | null;
  is_async: number;
  total_tokens: Count | null;
  tool_use_count: Count | null;
  duration_ms: Count | null;
  source: string;
  observed_at: string;
  settled_at: string | null;
  updated_at: string;
}

/**
 * The rows that history derives, as a query over the installed derivation: for each (session, tool call)
 * the newest qualifying message (created_at, then id) through subagent_context_derive_row, under the message's own
 * metadata.agent_execution_id, else 'unknown'. A reference for tests and benchmarks to compare stored rows
 * with (the installation stores history in windows: sql/code/backfill.sql); run it with the installation's
 * schema first on search_path.
 */
export const HISTORY_ROWS = `(
  SELECT DISTINCT ON (d.task_session_id, d.tool_call_id) d.*
    FROM task_session_messages AS m
   CROSS JOIN LATERAL (SELECT subagent_context_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
   CROSS JOIN LATERAL subagent_context_derive_row(m.task_session_id, m.task_id, m.turn_id, p.doc, m.created_at,
           coalesce(m.updated_at, clock_timestamp() AT TIME ZONE 'UTC'), subagent_context_execution_id(p.doc, NULL)) AS d
   WHERE subagent_context_may_qualify(m.metadata)
   ORDER BY d.task_session_id, d.tool_call_id, m.created_at DESC, m.id DESC)`;
