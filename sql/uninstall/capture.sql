-- Uninstall, after uninstall/deactivate.sql and before code/drop-code.sql (the loader applies the three in one
-- transaction): stop capturing and remove the capture function, the counters, health's index on kandev's
-- table and the reconciliation's record. Internal; run by `subagent-context uninstall` and node-pg-migrate down, and by
-- hand with psql (docs/uninstall.md). The data stays: task_session_subagents and subagent_context_failures
-- are dropped only by uninstall/data.sql. The activation keys go because they claim "captured since": after
-- an uninstall that is no longer true; a later install backfills the gap and publishes fresh keys.

-- On Citus, Citus drops the source of a moved or split shard later (its cleaner, or CALL
-- citus_cleanup_orphaned_resources()), and until then that old shard still carries the capture trigger, so
-- dropping the trigger function would fail on its worker halfway: refuse first, in one sentence.
DO $citus_orphans$
DECLARE
  orphans boolean := false;
BEGIN
  IF to_regclass('pg_catalog.pg_dist_cleanup') IS NOT NULL THEN  -- EXECUTE: the catalogs exist only on Citus
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)
                AND EXISTS (SELECT 1 FROM pg_catalog.pg_dist_cleanup)'
       INTO orphans USING '@extschema@.task_session_messages'::regclass;
  END IF;
  IF orphans THEN
    RAISE EXCEPTION 'subagent-context: Citus still holds the old copies of moved shards, which carry the capture trigger; run CALL citus_cleanup_orphaned_resources() on the coordinator, then uninstall again (nothing was changed)'
      USING ERRCODE = 'object_in_use';
  END IF;
END
$citus_orphans$;

DROP TRIGGER IF EXISTS subagent_context_capture ON @extschema@.task_session_messages;
DROP FUNCTION IF EXISTS @extschema@.subagent_context_capture_message();
DROP FUNCTION IF EXISTS @extschema@.capture_subagent_message();  -- its name until 0.4.0
DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx;
DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx_old;

-- The counters, as the catalog has them: sequences named subagent_context_<name>_seq that no column owns
-- (the failure log's identity sequence is owned). On Citus, the workers' copies too.
DO $counters$
DECLARE
  counters text[];
  distributed boolean := false;
BEGIN
  SELECT array_agg(format('%s.%I', '@extschema@', s.relname)) INTO counters
    FROM pg_class AS s
   WHERE s.relkind = 'S' AND s.relnamespace = '@extschema@'::regnamespace
     AND s.relname LIKE 'subagent\_context\_%\_seq'
     AND NOT EXISTS (SELECT 1 FROM pg_depend AS d
                      WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype IN ('a', 'i'));
  IF counters IS NULL THEN
    RETURN;
  END IF;
  EXECUTE 'DROP SEQUENCE ' || array_to_string(counters, ', ');
  IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
       INTO distributed USING '@extschema@.task_session_messages'::regclass;
  END IF;
  IF distributed THEN
    PERFORM run_command_on_workers('DROP SEQUENCE IF EXISTS ' || array_to_string(counters, ', '));
  END IF;
END
$counters$;

-- The reconciliation's record describes the activation that ends here (uninstall/deactivate.sql removed its keys);
-- where an unfinished backfill stood means nothing without them; what was installed is gone.
DROP TABLE IF EXISTS @extschema@.subagent_context_reconciliation_keys, @extschema@.subagent_context_reconciliations,
  @extschema@.subagent_context_missing_keys, @extschema@.subagent_context_backfill_progress,
  @extschema@.subagent_context_installed;
