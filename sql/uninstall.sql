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
-- The counters (counters.sql) as the catalog has them, not by a rendered list: this file is also run by
-- hand (docs/uninstall.md), where only @extschema@ is replaced. A counter is a sequence named
-- subagent_context_<name>_seq that no column owns (the failure log's identity sequence is owned).
DO $counters$
DECLARE
  counters text;
BEGIN
  SELECT string_agg(s.oid::regclass::text, ', ') INTO counters
    FROM pg_class AS s
   WHERE s.relkind = 'S' AND s.relnamespace = '@extschema@'::regnamespace
     AND s.relname LIKE 'subagent\_context\_%\_seq'
     AND NOT EXISTS (SELECT 1 FROM pg_depend AS d
                      WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype IN ('a', 'i'));
  IF counters IS NOT NULL THEN
    EXECUTE 'DROP SEQUENCE ' || counters;
  END IF;
END
$counters$;
DELETE FROM @extschema@.kandev_meta
 WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through');
-- The reconciliation's record describes the activation that ends here (health reads it only for the
-- capture_since it compared from): it goes with the keys. The rows and the failure log stay.
DROP TABLE IF EXISTS @extschema@.subagent_context_reconciliation_keys, @extschema@.subagent_context_reconciliations;
-- Where an unfinished backfill stood means nothing without the keys: the next install walks from the top.
DROP TABLE IF EXISTS @extschema@.subagent_context_backfill_progress;
