-- task_session_subagents as kandev >= 0.89 creates it itself (docs/install.md): integer metrics, and
-- agent_execution_id DEFAULT 'unknown'. kandev's own writer fills it with real execution ids.
CREATE TABLE @extschema@.task_session_subagents (
  id text PRIMARY KEY,
  task_session_id text NOT NULL REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE,
  task_id text NOT NULL, turn_id text, tool_call_id text NOT NULL,
  agent_execution_id text NOT NULL DEFAULT 'unknown', parent_tool_call_id text, subagent_type text,
  description text, agent_id text, child_session_id text, model text, agent_status text, tool_status text,
  is_async integer NOT NULL DEFAULT 0, total_tokens integer, tool_use_count integer, duration_ms integer,
  source text NOT NULL DEFAULT 'live', observed_at timestamp NOT NULL, settled_at timestamp,
  updated_at timestamp NOT NULL,
  UNIQUE (task_session_id, agent_execution_id, tool_call_id));
