-- Where the installation runs: 'citus' (task_session_messages is a Citus distributed table), 'partitioned'
-- (a declaratively partitioned table) or 'plain'. Public: the report asks it, to leave out what a topology
-- cannot answer instead of answering from the wrong data; the counters ask it (code/stats.sql).
--
-- On Citus every function of the installation that reads a table is PL/pgSQL: Citus plans no query against
-- a distributed table inside a parameterized SQL function, and PL/pgSQL plans each query with its
-- parameters bound. The SQL functions left are pure (they run inlined, on the workers too).
CREATE FUNCTION @extschema@.subagent_context_topology()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  messages regclass := '@extschema@.task_session_messages'::regclass;
  distributed boolean := false;
BEGIN
  IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    -- EXECUTE: the catalog exists only where Citus is installed.
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
       INTO distributed USING messages;
  END IF;
  RETURN CASE WHEN distributed THEN 'citus'
              WHEN (SELECT c.relkind FROM pg_class AS c WHERE c.oid = messages) = 'p' THEN 'partitioned'
              ELSE 'plain' END;
END
$$;

-- Whether this server or transaction cannot write (a standby, or a read-only transaction): health and the
-- reconciliation then record nothing (a standby reads the primary's record), and repair refuses. Internal.
CREATE FUNCTION @extschema@.subagent_context_read_only()
RETURNS boolean LANGUAGE sql STABLE
AS $$ SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' $$;
