-- subagent_context_stats() (public interface): the six capture counters of data/counters.sql as one row.

-- How many times a counter sequence has been advanced (0 before its first nextval). On Citus the trigger
-- advances the sequences of the node where it fires, so a counter is the sum over the coordinator and every
-- worker; a worker that does not answer fails the read: never a partial sum.
CREATE FUNCTION @extschema@.subagent_context_counter(seq regclass)
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  query text := format('SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s.%I', '@extschema@',
                       (SELECT c.relname FROM pg_class AS c WHERE c.oid = seq));
  n bigint;
  node record;
BEGIN
  EXECUTE query INTO n;
  IF @extschema@.subagent_context_topology() = 'citus' THEN
    FOR node IN SELECT * FROM run_command_on_workers(query) LOOP
      IF NOT node.success THEN
        RAISE EXCEPTION 'subagent-context: could not read counter % on worker %:%: %', seq, node.nodename, node.nodeport, node.result;
      END IF;
      n := n + node.result::bigint;
    END LOOP;
  END IF;
  RETURN n;
END
$$;

-- One row: the six counters. SECURITY DEFINER so a dashboard role can read them without privileges
-- on the sequences.
CREATE FUNCTION @extschema@.subagent_context_stats(
  OUT attempted bigint, OUT skipped_no_identity bigint, OUT persisted bigint,
  OUT failed bigint, OUT anomalous_value bigint, OUT unknown_execution bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT @extschema@.subagent_context_counter('@extschema@.subagent_context_attempted_seq'),
         @extschema@.subagent_context_counter('@extschema@.subagent_context_skipped_no_identity_seq'),
         @extschema@.subagent_context_counter('@extschema@.subagent_context_persisted_seq'),
         @extschema@.subagent_context_counter('@extschema@.subagent_context_failed_seq'),
         @extschema@.subagent_context_counter('@extschema@.subagent_context_anomalous_value_seq'),
         @extschema@.subagent_context_counter('@extschema@.subagent_context_unknown_execution_seq')
$$;
