-- subagent_context_stats() (public interface): the six capture counters of counters.sql as one row.

-- How many times a counter sequence has been advanced (0 before its first nextval).
CREATE FUNCTION @extschema@.subagent_context_counter(seq regclass)
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s', seq) INTO n;
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
