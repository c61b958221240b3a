-- task_session_subagents (public interface): one row per subagent invocation. Data layer: kept across
-- releases. An existing table (an earlier release's, or kandev >= 0.89's own) is left to data/table-shape.sql,
-- which checks and adopts it.
-- Whether this transaction creates the table: its foreign key to kandev's task_sessions is added at the end
-- (data/table-foreign-key.sql), once guards/lock-host.sql holds task_sessions within its bounded tries.
SELECT pg_catalog.set_config('subagent_context.table_created',
         (pg_catalog.to_regclass('@extschema@.task_session_subagents') IS NULL)::text, true);
CREATE TABLE IF NOT EXISTS @extschema@.task_session_subagents (
  id                  text PRIMARY KEY,
  task_session_id     text NOT NULL,             -- references task_sessions: data/table-foreign-key.sql
  task_id             text NOT NULL,
  turn_id             text,                      -- no foreign key: the record outlives its turn
  tool_call_id        text NOT NULL,
  agent_execution_id  text NOT NULL,             -- no foreign key; 'unknown' when the host does not say
  parent_tool_call_id text,
  subagent_type       text,
  description         text,
  agent_id            text,
  child_session_id    text,
  model               text,
  agent_status        text,
  tool_status         text,
  is_async            integer NOT NULL DEFAULT 0,
  total_tokens        bigint,                    -- NULL: not reported (never 0 by default)
  tool_use_count      bigint,
  duration_ms         bigint,
  source              text NOT NULL DEFAULT 'live',
  observed_at         timestamp(6) NOT NULL,
  settled_at          timestamp(6),
  updated_at          timestamp(6) NOT NULL,
  CONSTRAINT task_session_subagents_key UNIQUE (task_session_id, agent_execution_id, tool_call_id)
) WITH (fillfactor = 90);  -- room on the page keeps the frequent merge updates HOT
