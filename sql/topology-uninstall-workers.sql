-- Uninstall on Citus (after uninstall.sql): the counter sequences that topology.sql created on every
-- worker go too. Nothing on a plain server or a local table.
DO $topology_uninstall$
BEGIN
  IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
    RETURN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                  WHERE logicalrelid = '@extschema@.task_session_messages'::regclass) THEN
    RETURN;
  END IF;
  PERFORM run_command_on_workers(format('DROP SEQUENCE IF EXISTS %s', '@extschema@.' || s))
     FROM unnest(@counter_sequences@) AS s;
END
$topology_uninstall$;
