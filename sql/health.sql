-- Health: is capture complete since activation? From the database alone (docs/health.md). Public
-- interface: subagent_context_health(), one row that dashboards, the metrics endpoint, the report and
-- the CLI all show, and whose `status` is the one verdict; subagent_context_repair(). The rest is internal.
--
-- shortfall is the only alarm: qualifying messages (full identity) created since capture_since whose
-- (session, tool call) has no row observed since then. excess is the reverse (rows with no qualifying
-- message since then): reported, never an alarm. Two separate anti-joins, never netted.

-- Where rows and qualifying messages disagree now, by (session, tool call), from one comparison of recent
-- writes: kind 'missing', the keys the newest completed reconciliation recorded (reconcile.sql) that still
-- have no row observed since capture_since (re-checked here, so `repair` clears them at once), and those of
-- messages created since that reconciliation started; kind 'excess', the excess keys it recorded and
-- those of rows observed since it started. Without a completed reconciliation of this activation, the
-- recent part starts at capture_since: correct, and as costly as history (`up` and `health --full`
-- complete one). Internal: health counts both kinds from one call.
CREATE FUNCTION @extschema@.subagent_context_discrepancies()
RETURNS TABLE (kind text, task_session_id text, tool_call_id text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_parse_key(
                       @extschema@.subagent_context_key('subagent_context_capture_since'));
  rec record;
BEGIN
  IF since IS NULL THEN
    RETURN;
  END IF;
  SELECT * INTO rec FROM @extschema@.subagent_context_reconciled(since);
  -- EXECUTE: planned for the actual window start (a recent window reads only health's index).
  RETURN QUERY EXECUTE $q$
    WITH recorded AS MATERIALIZED (
           SELECT k.kind, k.task_session_id, k.tool_call_id FROM @extschema@.subagent_context_reconciliation_keys AS k
            WHERE k.reconciliation_id = $3),
         recent AS MATERIALIZED (
           SELECT c.kind, c.task_session_id, c.tool_call_id
             FROM @extschema@.subagent_context_compare($1, $2, 'infinity') AS c),
         stored AS MATERIALIZED (
           SELECT DISTINCT r.task_session_id, r.tool_call_id
             FROM recorded AS k
             JOIN @extschema@.task_session_subagents AS r
               ON r.task_session_id = k.task_session_id AND r.tool_call_id = k.tool_call_id
            WHERE k.kind = 'missing' AND r.observed_at >= $1)
    ((SELECT 'missing', k.task_session_id, k.tool_call_id FROM recorded AS k WHERE k.kind = 'missing'
      EXCEPT
      SELECT 'missing', s.task_session_id, s.tool_call_id FROM stored AS s)
     UNION
     SELECT 'missing', c.task_session_id, c.tool_call_id FROM recent AS c WHERE c.kind = 'missing')
    UNION ALL
    SELECT 'excess', k.task_session_id, k.tool_call_id FROM recorded AS k WHERE k.kind = 'excess'
    UNION ALL
    SELECT 'excess', c.task_session_id, c.tool_call_id FROM recent AS c WHERE c.kind = 'excess'
  $q$ USING since, coalesce(rec.started_at, since), rec.id;
END
$$;

-- The (session, tool call) keys missing now (subagent_context_discrepancies(), kind 'missing'). Public
-- interface: the list behind health's shortfall, and what `repair` stores rows for.
CREATE FUNCTION @extschema@.subagent_context_missing()
RETURNS TABLE (task_session_id text, tool_call_id text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY SELECT d.task_session_id, d.tool_call_id FROM @extschema@.subagent_context_discrepancies() AS d
                WHERE d.kind = 'missing';
END
$$;

CREATE FUNCTION @extschema@.subagent_context_health(
  OUT activated boolean, OUT capture_since text, OUT backfill_through text,
  OUT shortfall bigint, OUT excess bigint, OUT last_observed_at timestamp,
  OUT trigger_enabled boolean, OUT failures bigint, OUT collisions bigint,
  OUT status text, OUT installed_version text, OUT reconciled_at timestamp)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp;
  trigger_state "char";
  rec record;
BEGIN
  installed_version := (SELECT i.version FROM @extschema@.subagent_context_installation() AS i);
  capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
  backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
  since := @extschema@.subagent_context_parse_key(capture_since);
  activated := since IS NOT NULL;

  -- 'O' fires in normal sessions, 'A' always; 'D' is disabled and 'R' fires only on replicas.
  trigger_state := @extschema@.subagent_context_trigger_state();
  trigger_enabled := coalesce(trigger_state IN ('O', 'A'), false);

  -- The verdict, first match wins (docs/health.md#status); the last three need the comparison below.
  status := CASE WHEN (to_regprocedure('@extschema@.capture_subagent_message()') IS NULL
                    OR to_regclass('@extschema@.task_session_subagents') IS NULL
                    OR to_regclass('@extschema@.subagent_context_failures') IS NULL)
                   AND trigger_state IS NOT NULL THEN 'trigger_orphaned'
                 WHEN to_regprocedure('@extschema@.capture_subagent_message()') IS NULL
                   OR to_regclass('@extschema@.task_session_subagents') IS NULL THEN 'not_installed'
                 WHEN trigger_state IS NULL THEN 'trigger_missing'
                 WHEN NOT trigger_enabled THEN 'trigger_disabled'
                 WHEN NOT activated THEN 'not_activated' END;
  IF status IN ('not_installed', 'trigger_orphaned') THEN
    RETURN;
  END IF;

  -- Rows that share (session, tool call) with a row of another execution (docs/integration.md). Two rows of one
  -- key have different execution ids (the unique key), so at most one of them is 'unknown': only keys
  -- with a row of a known execution can collide. task_session_subagents_known_execution_idx (table.sql)
  -- lists exactly those; it is empty where the host sends no execution id, so this costs nothing there
  -- instead of grouping the whole table.
  SELECT coalesce(sum(n), 0) INTO collisions
    FROM (SELECT count(*) AS n FROM @extschema@.task_session_subagents AS r
           WHERE (r.task_session_id, r.tool_call_id) IN (
                   SELECT k.task_session_id, k.tool_call_id FROM @extschema@.task_session_subagents AS k
                    WHERE k.agent_execution_id <> 'unknown')
           GROUP BY r.task_session_id, r.tool_call_id HAVING count(*) > 1) AS c;

  -- Until activation there is nothing to compare against: shortfall, excess, last_observed_at and
  -- failures stay NULL.
  IF NOT activated THEN
    RETURN;
  END IF;

  -- What the newest completed reconciliation found, re-checked, plus what was written since it started:
  -- the cost of recent writes, never of history (docs/health.md#reconciliation).
  SELECT * INTO rec FROM @extschema@.subagent_context_reconciled(since);
  reconciled_at := rec.started_at;
  SELECT count(*) FILTER (WHERE d.kind = 'missing'), count(*) FILTER (WHERE d.kind = 'excess')
    INTO shortfall, excess FROM @extschema@.subagent_context_discrepancies() AS d;

  SELECT max(r.observed_at) INTO last_observed_at
    FROM @extschema@.task_session_subagents AS r WHERE r.observed_at >= since;

  SELECT count(*) INTO failures
    FROM @extschema@.subagent_context_failures AS f WHERE f.occurred_at >= since;

  status := coalesce(status, CASE WHEN shortfall > 0 THEN 'shortfall'
                                  WHEN last_observed_at IS NULL THEN 'idle'
                                  ELSE 'healthy' END);
END
$$;

-- Repair: store the rows the shortfall lists as missing (subagent_context_missing()), each re-derived from
-- its newest qualifying message created since capture_since, through the same derivation as capture and
-- the same rule as the backfill (source 'backfill'; a key with a row under any execution id is left
-- alone). Existing rows are never touched. At most max_keys keys per call, so that one call is a short
-- transaction (the CLI calls it until nothing is left); its rows are inserted at the statement's end, so
-- a live write of one of those keys waits at most for the insert and the commit. repaired: rows stored;
-- remaining: the keys missing when this call began, less those it stored (counted from the same list, not
-- compared again while its rows are locked). It runs with the caller's privileges (writing rows is the
-- installing role's, or a role granted INSERT on the table).
CREATE FUNCTION @extschema@.subagent_context_repair(max_keys integer DEFAULT 2000,
  OUT repaired bigint, OUT remaining bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_parse_key(
                       @extschema@.subagent_context_key('subagent_context_capture_since'));
  missing_before bigint;
BEGIN
  IF since IS NULL THEN
    RAISE EXCEPTION 'subagent-context is not activated in schema %: there is no capture_since key', '@extschema@'
      USING HINT = 'Run `subagent-context up` (or `subagent-context backfill`) first.',
            ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  IF pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' THEN
    RAISE EXCEPTION 'subagent-context repair writes rows, and this server or transaction is read-only'
      USING HINT = 'Run `subagent-context repair` against the primary; health, report and metrics work here.',
            ERRCODE = 'read_only_sql_transaction';
  END IF;
  WITH missing AS MATERIALIZED (
         SELECT k.task_session_id, k.tool_call_id FROM @extschema@.subagent_context_missing() AS k),
       candidates AS MATERIALIZED (
         SELECT k.task_session_id, k.tool_call_id FROM missing AS k ORDER BY 1, 2 LIMIT greatest(max_keys, 1)),
       -- Each key's newest qualifying message since activation, found through the session's messages.
       history AS MATERIALIZED (
         SELECT DISTINCT ON (d.task_session_id, d.tool_call_id) d.*
           FROM candidates AS b
           JOIN @extschema@.task_session_messages AS m ON m.task_session_id = b.task_session_id
          CROSS JOIN LATERAL (SELECT @extschema@.subagent_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
          CROSS JOIN LATERAL @extschema@.derive_subagent_row(
                  m.task_session_id, m.task_id, m.turn_id, p.doc,
                  coalesce(m.created_at, clock_timestamp() AT TIME ZONE 'UTC'),
                  coalesce(m.updated_at, clock_timestamp() AT TIME ZONE 'UTC'),
                  @extschema@.subagent_execution_id(p.doc, NULL)) AS d
          WHERE m.created_at >= since AND @extschema@.subagent_may_qualify(m.metadata)
            AND d.tool_call_id = b.tool_call_id
          ORDER BY d.task_session_id, d.tool_call_id, m.created_at DESC, m.id DESC)
  -- Stored unless the key has a row under any execution id, observed whenever (the backfill's rule).
  SELECT @extschema@.subagent_store_history_rows(array_agg(ROW(h.*)::@extschema@.subagent_row)),
         (SELECT count(*) FROM missing)
    INTO repaired, missing_before FROM history AS h;
  repaired := coalesce(repaired, 0);
  remaining := missing_before - repaired;
END
$$;
