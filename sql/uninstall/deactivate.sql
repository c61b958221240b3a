-- Deactivation: the activation keys go, and with them where an unfinished backfill stood (it means nothing
-- without them). Internal; the down of every activation migration, and part of uninstall. Health then says
-- not_activated; `subagent-context backfill` (or `up`) activates again.
-- kandev_meta's own code never runs as us (code/meta-writable.sql, applied before this file by the loader).
DO $meta$
BEGIN
  PERFORM @extschema@.subagent_context_assert_meta_writable();
END
$meta$;
DELETE FROM @extschema@.kandev_meta
 WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through');
-- Releases before 0.3.0 had no such table.
DO $deactivate$
BEGIN
  IF to_regclass('@extschema@.subagent_context_backfill_progress') IS NOT NULL THEN
    DELETE FROM @extschema@.subagent_context_backfill_progress;
  END IF;
END
$deactivate$;
