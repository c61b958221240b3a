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
DO $counters$ BEGIN
  EXECUTE (SELECT 'DROP SEQUENCE IF EXISTS ' || string_agg(format('@extschema@.%I', s), ', ')
             FROM unnest(@counter_sequences@) AS s);
END $counters$;
DELETE FROM @extschema@.kandev_meta
 WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through');
-- The reconciliation's record describes the activation that ends here (health reads it only for the
-- capture_since it compared from): it goes with the keys. The rows and the failure log stay.
DROP TABLE IF EXISTS @extschema@.subagent_context_reconciliation_keys, @extschema@.subagent_context_reconciliations;
