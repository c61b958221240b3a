-- The Citus check, first in every install, upgrade and uninstall transaction. Internal. Nothing on a plain
-- server or a partitioned table. On Citus (docs/citus.md), where kandev's task_session_messages is a
-- distributed table, the tables capture writes must be distributed and co-located with it (the trigger
-- fires on the worker holding a message's shard and writes next to it): otherwise it refuses in one
-- sentence before anything is changed. Then, for this transaction only:
-- - citus.multi_shard_modify_mode = 'sequential': Citus refuses a function command (CREATE FUNCTION,
--   propagated to every node) after a parallel multi-shard operation in the same transaction;
-- - citus.enable_unsafe_triggers = on: Citus refuses CREATE TRIGGER on a distributed table without it.
--   Safe here: the trigger writes only the co-located shard of the message's own task_session_id.
DO $citus_check$
DECLARE
  messages regclass := '@extschema@.task_session_messages'::regclass;
  colocation integer;
  t text;
  found_kind "char";
  found_column text;
  found_colocation integer;
BEGIN
  IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
    RETURN;  -- not Citus
  END IF;
  EXECUTE 'SELECT partmethod, column_to_column_name(logicalrelid, partkey), colocationid
             FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1'
     INTO found_kind, found_column, colocation USING messages;
  IF found_kind IS NULL THEN
    RETURN;  -- a plain (local) table on a Citus node: nothing distributed, nothing special
  END IF;
  IF found_kind IS DISTINCT FROM 'h' OR found_column IS DISTINCT FROM 'task_session_id' THEN
    RAISE EXCEPTION 'subagent-context: on Citus, task_session_messages must be distributed by hash on task_session_id (it is distributed % on %); see docs/citus.md',
      found_kind, coalesce(found_column, 'no column') USING ERRCODE = 'feature_not_supported';
  END IF;
  FOREACH t IN ARRAY ARRAY['task_session_subagents', 'subagent_context_failures'] LOOP
    found_kind := NULL; found_column := NULL; found_colocation := NULL;
    IF to_regclass(format('%s.%I', '@extschema@', t)) IS NOT NULL THEN
      EXECUTE 'SELECT partmethod, column_to_column_name(logicalrelid, partkey), colocationid
                 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1'
         INTO found_kind, found_column, found_colocation USING to_regclass(format('%s.%I', '@extschema@', t));
    END IF;
    IF found_colocation IS DISTINCT FROM colocation OR found_column IS DISTINCT FROM 'task_session_id' THEN
      RAISE EXCEPTION 'subagent-context: on Citus, create % distributed on task_session_id and co-located with task_session_messages before `up` (docs/citus.md, step 2); nothing was changed', t
        USING ERRCODE = 'feature_not_supported';
    END IF;
  END LOOP;
  PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
  PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
END
$citus_check$;
