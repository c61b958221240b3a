-- Who may call what (docs/security.md#who-may-call-what), after every function of the code layer exists.
-- PostgreSQL lets PUBLIC execute a new function; here nothing of the installation is, except the readers
-- below, which return counts, timestamps and versions computed as their owner: enough for a dashboard or
-- the exporter with USAGE on the schema. Everything that returns ids (the missing keys, the discrepancies)
-- or writes (backfill, reconciliation, repair) is the installing role's, and of the roles it grants
-- EXECUTE to explicitly.
DO $grants$
DECLARE
  o record;
BEGIN
  FOR o IN SELECT * FROM @extschema@.subagent_context_ours() WHERE kind <> 'TYPE' LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM PUBLIC', o.kind, o.oid::regprocedure);
  END LOOP;
END
$grants$;
GRANT EXECUTE ON FUNCTION
  @extschema@.subagent_context_health(),
  @extschema@.subagent_context_stats(),
  @extschema@.subagent_context_installation(),
  @extschema@.subagent_context_topology(),
  @extschema@.subagent_context_last_message_at(),
  @extschema@.subagent_context_trigger_state(),
  @extschema@.subagent_context_parse_key(text)
TO PUBLIC;
