-- Topology, in the code layer (after the other code files, before installation.sql; docs/citus.md).
-- Internal: subagent_context_topology() (which layout the report goes by), and on Citus only the
-- conversion below. Nothing else changes on a plain server, or where task_session_messages is not a
-- distributed table.
--
-- Citus cannot plan a query against a distributed table inside a LANGUAGE sql function that takes
-- parameters: called directly it fails ("could not create distributed plan"), and where PostgreSQL
-- inlines it into a caller the caller's query fails the same way. PL/pgSQL functions work: Citus plans
-- each of their queries with the parameters bound. So here every SQL function of this product that
-- reads a table is re-created as PL/pgSQL with the same signature and the same query (taken from the
-- installed function, so the two topologies cannot drift): a set-returning one returns its query, one
-- with OUT columns selects into them, a scalar one returns the value. Helpers that read no table stay
-- LANGUAGE sql (they run on the workers, inlined into the shard queries).
--
-- The list is checked by test/topology.test.ts on every server: every LANGUAGE sql function of an
-- installation that names a table must be in it.

-- Where the installation runs: 'citus' (task_session_messages is a Citus distributed table),
-- 'partitioned' (a declaratively partitioned table) or 'plain'. The report asks it, to leave out what
-- a topology cannot answer instead of answering from the wrong data.
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

DO $citus$
DECLARE
  f record;
  body text;
  definition text;
BEGIN
  IF @extschema@.subagent_context_topology() <> 'citus' THEN
    RETURN;
  END IF;
  FOR f IN
    SELECT p.oid, p.proretset, rtrim(btrim(p.prosrc, E' \n\t'), ';') AS query,
           (SELECT array_agg(a.name ORDER BY a.n)
              FROM unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS a(name, mode, n)
             WHERE a.mode IN ('o', 'b')) AS outs
      FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
     WHERE p.pronamespace = '@extschema@'::regnamespace AND l.lanname = 'sql'
       AND p.proname IN ('subagent_context_key', 'subagent_message_keys', 'subagent_context_compare',
                         'subagent_context_reconciled',
                         'subagent_history_rows', 'subagent_store_history_batch')
  LOOP
    IF f.proretset THEN
      body := E'#variable_conflict use_column\nBEGIN\n  RETURN QUERY ' || f.query || E';\nEND';
    ELSIF f.outs IS NOT NULL THEN
      body := E'#variable_conflict use_column\nBEGIN\n  ' || f.query || E'\n  INTO ' ||
              array_to_string(ARRAY(SELECT quote_ident(o) FROM unnest(f.outs) AS o), ', ') || E';\nEND';
    ELSE
      body := E'#variable_conflict use_column\nBEGIN\n  RETURN (' || f.query || E');\nEND';
    END IF;
    definition := pg_get_functiondef(f.oid);
    definition := regexp_replace(definition, E'\\n LANGUAGE sql\\n', E'\n LANGUAGE plpgsql\n');
    -- pg_get_functiondef ends with the body: AS $function$ … $function$.
    definition := left(definition, strpos(definition, E'\nAS $function$')) || 'AS ' || quote_literal(body);
    EXECUTE definition;
  END LOOP;
END
$citus$;

DO $citus_counters$
BEGIN
  IF @extschema@.subagent_context_topology() <> 'citus' THEN
    RETURN;
  END IF;
  -- The counters: the trigger advances the sequences of the node where it fires (topology.sql created
  -- them on every worker), so a counter is the sum over the coordinator and every worker. A worker
  -- that does not answer fails the read: never a partial sum.
  CREATE OR REPLACE FUNCTION @extschema@.subagent_context_counter(seq regclass)
  RETURNS bigint
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
  AS $counter$
  DECLARE
    query text := format('SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s', seq);
    n bigint;
    node record;
  BEGIN
    EXECUTE query INTO n;
    FOR node IN SELECT * FROM pg_catalog.run_command_on_workers(query) LOOP
      IF NOT node.success THEN
        RAISE EXCEPTION 'subagent-context: could not read counter % on worker %:%: %', seq, node.nodename, node.nodeport, node.result;
      END IF;
      n := n + node.result::bigint;
    END LOOP;
    RETURN n;
  END
  $counter$;
END
$citus_counters$;
