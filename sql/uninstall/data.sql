-- Uninstall, data too (`subagent-context uninstall --drop-data`): drop the derived rows and the failure
-- log. Internal. The first statement refuses, before anything is dropped, when task_session_subagents was
-- not created by this project (kandev's own table, adopted at install: data/table.sql records who created it).
DO $owned$
DECLARE
  target regclass := to_regclass('@extschema@.task_session_subagents');
BEGIN
  IF target IS NOT NULL
     AND obj_description(target, 'pg_class') IS DISTINCT FROM 'subagent-context: created by subagent-context' THEN
    RAISE EXCEPTION 'subagent-context: %.task_session_subagents was not created by subagent-context (kandev created it and the install adopted it), so --drop-data drops nothing; uninstall without --drop-data, and drop it yourself if kandev no longer needs it', '@extschema@'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
END
$owned$;
-- statement
DROP TABLE IF EXISTS @extschema@.task_session_subagents;
-- statement
DROP TABLE IF EXISTS @extschema@.subagent_context_failures;
