-- docs/citus.md, step 2: on Citus the two tables capture writes are created by the operator before
-- `up`, distributed on task_session_id and co-located with task_session_messages; `up` adopts them.
-- Citus needs task_session_id in every primary key, so these differ from the product's own tables
-- (sql/data/table.sql, sql/data/failures.sql) only in their primary keys, and the failure log's session NOT NULL.
CREATE TABLE @extschema@.task_session_subagents (
  id                  text NOT NULL,
  task_session_id     text NOT NULL REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE,
  task_id             text NOT NULL,
  turn_id             text,
  tool_call_id        text NOT NULL,
  agent_execution_id  text NOT NULL,
  parent_tool_call_id text,
  subagent_type       text,
  description         text,
  agent_id            text,
  child_session_id    text,
  model               text,
  agent_status        text,
  tool_status         text,
  is_async            integer NOT NULL DEFAULT 0,
  total_tokens        bigint,
  tool_use_count      bigint,
  duration_ms         bigint,
  source              text NOT NULL DEFAULT 'live',
  observed_at         timestamp(6) NOT NULL,
  settled_at          timestamp(6),
  updated_at          timestamp(6) NOT NULL,
  PRIMARY KEY (task_session_id, id),
  CONSTRAINT task_session_subagents_key UNIQUE (task_session_id, agent_execution_id, tool_call_id)
);
SELECT create_distributed_table('@extschema@.task_session_subagents', 'task_session_id',
                                colocate_with => '@extschema@.task_session_messages');
CREATE TABLE @extschema@.subagent_context_failures (
  id                 bigint GENERATED ALWAYS AS IDENTITY,
  occurred_at        timestamp(6) NOT NULL DEFAULT (clock_timestamp() AT TIME ZONE 'UTC'),
  task_session_id    text NOT NULL,
  tool_call_id       text,
  message_id         text,
  agent_execution_id text,
  sqlstate           text NOT NULL,
  message            text NOT NULL,
  detail             text,
  PRIMARY KEY (task_session_id, id)
);
SELECT create_distributed_table('@extschema@.subagent_context_failures', 'task_session_id',
                                colocate_with => '@extschema@.task_session_messages');
