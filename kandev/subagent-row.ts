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
