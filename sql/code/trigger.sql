-- The capture trigger on task_session_messages: the one statement of the code layer that needs a lock on
-- kandev's tables, so it comes last, after guards/lock-host.sql has taken that lock (docs/reliability.md#locks).
-- Everything before it (the functions, which Citus creates on every node, one round trip each) runs while
-- kandev writes on; its writes wait only for what follows the lock. Internal.
--
-- The WHEN clause is the non-subagent fast path: no function call, no parse, no queued trigger event.
-- It is the prefilter spelled out (MAY_QUALIFY in sql/loader.js), not a call of subagent_context_may_qualify():
-- a WHEN clause must not depend on EXECUTE privileges an operator may revoke, and an expression costs
-- less than a call.
-- Created again on every install of the code layer, keeping the state an operator gave it: CREATE OR
-- REPLACE TRIGGER alone would turn ENABLE ALWAYS (replica-role writers) or DISABLE back into ENABLE.
DO $trigger$
DECLARE
  state "char" := @extschema@.subagent_context_trigger_state();
BEGIN
  CREATE OR REPLACE TRIGGER subagent_context_capture
    AFTER INSERT OR UPDATE ON @extschema@.task_session_messages
    FOR EACH ROW
    WHEN (strpos(NEW.metadata, 'subagent_task') > 0)
    EXECUTE FUNCTION @extschema@.subagent_context_capture_message();
  CASE state
    WHEN 'A' THEN ALTER TABLE @extschema@.task_session_messages ENABLE ALWAYS TRIGGER subagent_context_capture;
    WHEN 'R' THEN ALTER TABLE @extschema@.task_session_messages ENABLE REPLICA TRIGGER subagent_context_capture;
    WHEN 'D' THEN ALTER TABLE @extschema@.task_session_messages DISABLE TRIGGER subagent_context_capture;
    ELSE NULL;  -- new, or 'O' (ENABLE): as created
  END CASE;
END
$trigger$;

-- The trigger's function under its name until 0.4.0, which the trigger no longer calls.
DROP FUNCTION IF EXISTS @extschema@.capture_subagent_message();
