-- Uninstall on Citus, before uninstall.sql: Citus drops the source of a moved or split shard later (its
-- cleaner, or CALL citus_cleanup_orphaned_resources()), and until then that old shard still carries the
-- capture trigger, so dropping the trigger function would fail on its worker halfway through. Refuse
-- first, in one sentence, with nothing changed. Nothing on a plain server or a local table.
DO $topology_uninstall$
DECLARE
  orphans boolean;
BEGIN
  IF to_regclass('pg_catalog.pg_dist_cleanup') IS NULL THEN
    RETURN;  -- not Citus (or one without deferred shard cleanup)
  END IF;
  -- EXECUTE: these catalogs exist only where Citus is installed.
  EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)
              AND EXISTS (SELECT 1 FROM pg_catalog.pg_dist_cleanup)'
     INTO orphans USING '@extschema@.task_session_messages'::regclass;
  IF orphans THEN
    RAISE EXCEPTION 'subagent-context: Citus still holds the old copies of moved shards, which carry the capture trigger; run CALL citus_cleanup_orphaned_resources() on the coordinator, then uninstall again (nothing was changed)'
      USING ERRCODE = 'object_in_use';
  END IF;
END
$topology_uninstall$;
