-- Last in the uninstall transaction: data/ours.sql's rule, which code/drop-code.sql has just used. Internal.
DROP FUNCTION IF EXISTS @extschema@.subagent_context_ours();
