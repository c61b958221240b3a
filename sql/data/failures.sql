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
-- When `repair` re-derived the row from the message as it is now (NULL: not yet).
ALTER TABLE @extschema@.subagent_context_failures ADD COLUMN IF NOT EXISTS replayed_at timestamp(6);
CREATE INDEX IF NOT EXISTS subagent_context_failures_occurred_idx
  ON @extschema@.subagent_context_failures (occurred_at);
REVOKE ALL ON @extschema@.subagent_context_failures FROM PUBLIC;
-- 0.5.0: one open row per message (docs/reliability.md#failure-log). A capture that fails again for a message
-- whose failure is not replayed yet counts the occurrence on that row instead of adding one per frame, under
-- the message's own row lock (two writers of one message never record at once). Added columns only, with
-- defaults: an earlier release, rolled back to, still inserts rows here as it did.
ALTER TABLE @extschema@.subagent_context_failures ADD COLUMN IF NOT EXISTS occurrences integer NOT NULL DEFAULT 1;
ALTER TABLE @extschema@.subagent_context_failures ADD COLUMN IF NOT EXISTS last_occurred_at timestamp(6);
-- Why replay leaves this failure for good (NULL: it does not): 'key_too_long' (the row's key is larger
-- than a btree entry of the unique key holds), 'value_not_storable' (the write fails on the data itself,
-- SQLSTATE class 22 or 54). Set once by `repair`; health reports these apart from the stale ones.
ALTER TABLE @extschema@.subagent_context_failures ADD COLUMN IF NOT EXISTS stays_because text;
-- Capture finds a message's open failure through this index (a few entries: only open failures).
CREATE INDEX IF NOT EXISTS subagent_context_failures_open_message_idx
  ON @extschema@.subagent_context_failures (message_id) WHERE replayed_at IS NULL;
