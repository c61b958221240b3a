-- subagent_context_failures (public interface; data layer, kept across upgrades): every capture write
-- that raised, caught so the message write could commit (docs/reliability.md). Operators query it;
-- health counts the rows recorded since activation that `repair` has not replayed yet.
CREATE TABLE IF NOT EXISTS @extschema@.subagent_context_failures (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  occurred_at        timestamp(6) NOT NULL DEFAULT (clock_timestamp() AT TIME ZONE 'UTC'),
  task_session_id    text,
  tool_call_id       text,
  message_id         text,
  agent_execution_id text,
  sqlstate           text NOT NULL,
  message            text NOT NULL,
  detail             text
);
REVOKE ALL ON @extschema@.subagent_context_failures FROM PUBLIC;
-- Its later columns and its indexes: data/failures-columns.sql, under the lock on kandev's tables.
