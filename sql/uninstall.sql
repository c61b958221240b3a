-- Uninstall, after drop-code.sql (migrations/lib/sql.js applies both): stop capturing and remove what is
-- left of the code, the counters, health's index on kandev's table and the activation keys. Internal;
-- run by `subagent-context uninstall` and by node-pg-migrate down. The data stays: task_session_subagents
-- and subagent_context_failures are dropped only by uninstall-data.sql.
-- The activation keys are removed, because they claim "captured since": after an uninstall that is no
-- longer true. A later install backfills the gap (existing rows win) and publishes fresh keys.
DROP TRIGGER IF EXISTS subagent_context_capture ON @extschema@.task_session_messages;
DROP FUNCTION IF EXISTS @extschema@.capture_subagent_message();
DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx;
DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx_old;
DROP SEQUENCE IF EXISTS
  @extschema@.subagent_context_attempted_seq, @extschema@.subagent_context_skipped_no_identity_seq,
  @extschema@.subagent_context_persisted_seq, @extschema@.subagent_context_failed_seq,
  @extschema@.subagent_context_anomalous_value_seq, @extschema@.subagent_context_unknown_execution_seq;
DELETE FROM @extschema@.kandev_meta
 WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through');
