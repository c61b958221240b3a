-- Uninstall, data too: after uninstall.sql, drop the derived rows and the failure log.
DROP TABLE IF EXISTS @extschema@.task_session_subagents;
DROP TABLE IF EXISTS @extschema@.subagent_context_failures;
