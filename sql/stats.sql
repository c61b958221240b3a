-- Capture statistics (SPEC §8): counted per qualifying message write.
--
-- Each counter is a sequence. nextval() never waits for another transaction and never takes a row lock,
-- so concurrent writers do not serialize on a hot counter row the way an UPDATE of a stats table would.
-- The price: counters are NOT transactional. A rolled-back message write still counts as attempted and
-- as whatever outcome it reached, and a counter moves even when the row it describes was rolled back.
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_attempted_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_skipped_no_identity_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_persisted_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_failed_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_anomalous_value_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_unknown_execution_seq;
REVOKE ALL ON SEQUENCE
  @extschema@.subagent_context_attempted_seq, @extschema@.subagent_context_skipped_no_identity_seq,
  @extschema@.subagent_context_persisted_seq, @extschema@.subagent_context_failed_seq,
  @extschema@.subagent_context_anomalous_value_seq, @extschema@.subagent_context_unknown_execution_seq
  FROM PUBLIC;

-- How many times a counter sequence has been advanced (0 before its first nextval).
CREATE OR REPLACE FUNCTION @extschema@.subagent_context_counter(seq regclass)
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
CREATE OR REPLACE FUNCTION @extschema@.subagent_context_stats(
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
