-- Health: is capture complete since activation? From the database alone (docs/health.md). Public
-- interface: subagent_context_health() (one row that dashboards, the metrics endpoint, the report and the
-- CLI all show; its `status` is the one verdict; callable by anyone with USAGE on the schema: counts and
-- timestamps only), subagent_context_missing() (the keys behind the shortfall: installing role only).
--
-- shortfall is the only alarm: qualifying messages (full identity) created since capture_since whose
-- (session, tool call) has no row observed since then. excess is the reverse (rows with no qualifying
-- message since then): reported, never an alarm. Two separate anti-joins, never netted.

-- The part of what was written past the reconciliation's frontier that one health call compares itself:
-- the newest subagent_context_health_messages() candidate messages; compared_from is where they start
-- (never inside an instant: an instant that does not fit is left out whole). uncompared: the candidates in
-- [frontier, compared_from), counted up to 20 times that number (a count at the cap means "at least").
-- Index reads only, bounded whatever a burst wrote. Internal.
CREATE FUNCTION @extschema@.subagent_context_recent_bounds(frontier timestamp,
  OUT compared_from timestamp, OUT uncompared bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cap integer := @extschema@.subagent_context_health_messages();
  newest timestamp[];
BEGIN
  EXECUTE $q$
    SELECT array_agg(w.created_at ORDER BY w.created_at DESC)
      FROM (SELECT m.created_at FROM @extschema@.task_session_messages AS m
             WHERE m.created_at >= $1 AND @extschema@.subagent_context_may_qualify(m.metadata)
             ORDER BY m.created_at DESC LIMIT $2 + 1) AS w
  $q$ INTO newest USING frontier, cap;
  IF coalesce(cardinality(newest), 0) <= cap THEN
    compared_from := frontier;
    uncompared := 0;
    RETURN;
  END IF;
  compared_from := newest[cap + 1] + interval '1 microsecond';
  EXECUTE $q$
    SELECT count(*) FROM (SELECT 1 FROM @extschema@.task_session_messages AS m
                           WHERE m.created_at >= $1 AND m.created_at < $2 AND @extschema@.subagent_context_may_qualify(m.metadata)
                           LIMIT $3) AS w
  $q$ INTO uncompared USING frontier, compared_from, 20 * cap;
END
$$;

-- Where rows and qualifying messages disagree now, by (session, tool call): kind 'missing', the keys
-- recorded missing (by a reconciliation step or repair) that still have no row observed since capture_since,
-- and those health's own part finds (subagent_context_recent_bounds()); kind 'excess', the excess keys the
-- reconciliation recorded and those of health's own part. Writes nothing. Internal (the list behind
-- subagent_context_missing()).
CREATE FUNCTION @extschema@.subagent_context_discrepancies()
RETURNS TABLE (kind text, task_session_id text, tool_call_id text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A plain index scan marks the entries of rows it finds dead, so after a large repair (every recorded key
-- deleted) only the first call walks them; a bitmap scan marks none and every call would, until vacuum.
SET enable_bitmapscan = off
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_capture_since();
  reconciled record;
  bounds record;
  recorded record;
  stored record;
BEGIN
  IF since IS NULL THEN
    RETURN;
  END IF;
  SELECT * INTO reconciled FROM @extschema@.subagent_context_reconciled(since);
  SELECT * INTO bounds FROM @extschema@.subagent_context_recent_bounds(coalesce(reconciled.compared_through, since));
  SELECT array_agg(k.task_session_id) AS sessions, array_agg(k.tool_call_id) AS calls,
         array_agg(k.message_created_at) AS instants
    INTO recorded
    FROM @extschema@.subagent_context_missing_keys AS k WHERE k.capture_since = since;
  SELECT * INTO stored FROM @extschema@.subagent_context_resolved_keys(since, recorded.sessions, recorded.calls, recorded.instants);

  RETURN QUERY
    SELECT DISTINCT d.kind, d.task_session_id, d.tool_call_id
      FROM (SELECT 'missing'::text AS kind, u.s AS task_session_id, u.c AS tool_call_id
              FROM unnest(recorded.sessions, recorded.calls) AS u(s, c)
              LEFT JOIN unnest(stored.sessions, stored.calls) AS x(s, c) ON x.s = u.s AND x.c = u.c
             WHERE x.s IS NULL
            UNION ALL
            SELECT 'excess', k.task_session_id, k.tool_call_id
              FROM @extschema@.subagent_context_reconciliation_keys AS k
             WHERE k.reconciliation_id = reconciled.id AND k.kind = 'excess'
            UNION ALL
            SELECT c.kind, c.task_session_id, c.tool_call_id
              FROM @extschema@.subagent_context_compare(since, bounds.compared_from, 'infinity') AS c) AS d;
END
$$;

-- The (session, tool call) keys missing now (subagent_context_discrepancies(), kind 'missing'). Public
-- interface, installing role only: the list behind health's shortfall.
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
  OUT status text, OUT installed_version text, OUT reconciled_at timestamp, OUT uncompared bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Every read here is bounded by an index; a plan that scanned a table instead, because its statistics are
-- stale (right after a large repair or backfill), would cost what history costs. JIT off: with seq scans
-- priced out, a query of a few rows looks costly enough to be compiled, which costs more than it saves.
SET enable_seqscan = off
SET enable_bitmapscan = off  -- see subagent_context_discrepancies()
SET jit = off
AS $$
DECLARE
  since timestamp;
  trigger_state "char";
  reconciled record;
  bounds record;
  sample record;
  stored record;
  recent record;
  recorded_n bigint;
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
  status := CASE WHEN (to_regprocedure('@extschema@.subagent_context_capture_message()') IS NULL
                    OR to_regclass('@extschema@.task_session_subagents') IS NULL
                    OR to_regclass('@extschema@.subagent_context_failures') IS NULL)
                   AND trigger_state IS NOT NULL THEN 'trigger_orphaned'
                 WHEN to_regprocedure('@extschema@.subagent_context_capture_message()') IS NULL
                   OR to_regclass('@extschema@.task_session_subagents') IS NULL THEN 'not_installed'
                 WHEN trigger_state IS NULL THEN 'trigger_missing'
                 WHEN NOT trigger_enabled THEN 'trigger_disabled'
                 WHEN NOT activated THEN 'not_activated' END;
  IF status IN ('not_installed', 'trigger_orphaned') THEN
    RETURN;
  END IF;

  -- Rows that share (session, tool call) with a row of another execution (docs/integration.md). Two rows
  -- of one key have different execution ids (the unique key), so at most one of them is 'unknown': only
  -- keys with a row of a known execution can collide, and task_session_subagents_known_execution_idx lists
  -- exactly those (none where the host sends no execution id, so this costs nothing there); each is then
  -- counted through the unique key and that index.
  SELECT coalesce(sum(c.n), 0) INTO collisions
    FROM (SELECT DISTINCT k.task_session_id, k.tool_call_id FROM @extschema@.task_session_subagents AS k
           WHERE k.agent_execution_id <> 'unknown') AS known
   CROSS JOIN LATERAL (
           SELECT count(*) AS n
             FROM (SELECT 1 FROM @extschema@.task_session_subagents AS r
                    WHERE r.task_session_id = known.task_session_id AND r.agent_execution_id = 'unknown'
                      AND r.tool_call_id = known.tool_call_id
                   UNION ALL
                   SELECT 1 FROM @extschema@.task_session_subagents AS r
                    WHERE r.task_session_id = known.task_session_id AND r.tool_call_id = known.tool_call_id
                      AND r.agent_execution_id <> 'unknown') AS x) AS c
   WHERE c.n > 1;

  -- Until activation there is nothing to compare against: shortfall, excess, last_observed_at and
  -- failures stay NULL.
  IF NOT activated THEN
    RETURN;
  END IF;

  -- A reader, bounded in every state (docs/health.md#bounded-in-every-state): it writes nothing and takes
  -- no lock beyond reading, so no session holding a call open can hold up the installer, the exporter or
  -- repair. shortfall: the keys recorded missing (by the reconciliation's steps and repair, which keep the
  -- record), less those of the newest subagent_context_health_messages() of them that have their row now
  -- (so `repair` clears the alarm at once), plus the misses among the newest messages past the frontier not
  -- recorded yet; what lies between the frontier and those is counted, not compared: uncompared.
  SELECT * INTO reconciled FROM @extschema@.subagent_context_reconciled(since);
  reconciled_at := reconciled.started_at;
  SELECT * INTO bounds FROM @extschema@.subagent_context_recent_bounds(coalesce(reconciled.compared_through, since));
  uncompared := bounds.uncompared;

  SELECT count(*) INTO recorded_n FROM @extschema@.subagent_context_missing_keys AS k WHERE k.capture_since = since;
  SELECT array_agg(k.task_session_id) AS sessions, array_agg(k.tool_call_id) AS calls, array_agg(k.message_created_at) AS instants
    INTO sample
    FROM (SELECT k.task_session_id, k.tool_call_id, k.message_created_at FROM @extschema@.subagent_context_missing_keys AS k
           WHERE k.capture_since = since
           ORDER BY k.message_created_at DESC LIMIT @extschema@.subagent_context_health_messages()) AS k;
  SELECT * INTO stored FROM @extschema@.subagent_context_resolved_keys(since, sample.sessions, sample.calls, sample.instants);

  SELECT count(*) FILTER (WHERE c.kind = 'missing' AND NOT EXISTS (
           SELECT 1 FROM @extschema@.subagent_context_missing_keys AS k
            WHERE k.capture_since = since
              AND md5(k.task_session_id || E'\x1f' || k.tool_call_id) = md5(c.task_session_id || E'\x1f' || c.tool_call_id))) AS missing,
         count(*) FILTER (WHERE c.kind = 'excess' AND NOT EXISTS (
           SELECT 1 FROM @extschema@.subagent_context_reconciliation_keys AS k
            WHERE k.reconciliation_id = reconciled.id AND k.kind = 'excess'
              AND md5(k.task_session_id || E'\x1f' || k.tool_call_id) = md5(c.task_session_id || E'\x1f' || c.tool_call_id))) AS excess
    INTO recent
    FROM (SELECT DISTINCT x.kind, x.task_session_id, x.tool_call_id
            FROM @extschema@.subagent_context_compare(since, bounds.compared_from, 'infinity') AS x) AS c;
  shortfall := recorded_n - coalesce(cardinality(stored.sessions), 0) + recent.missing;
  excess := recent.excess + (SELECT count(*) FROM @extschema@.subagent_context_reconciliation_keys AS k
                              WHERE k.reconciliation_id = reconciled.id AND k.kind = 'excess');

  SELECT max(r.observed_at) INTO last_observed_at
    FROM @extschema@.task_session_subagents AS r WHERE r.observed_at >= since;

  -- Failures recorded since activation that `repair` has not replayed yet and can still replay (rows that
  -- may differ from their messages); the ones it classified for good are counted apart
  -- (subagent_context_repair_leftovers()).
  SELECT count(*) INTO failures
    FROM @extschema@.subagent_context_failures AS f
   WHERE f.occurred_at >= since AND f.replayed_at IS NULL AND f.stays_because IS NULL;

  -- stale: failed captures not replayed yet (their rows may be missing or old); behind: nothing found missing
  -- so far, but messages past the frontier were not compared yet (docs/health.md#status).
  status := coalesce(status, CASE WHEN shortfall > 0 THEN 'shortfall'
                                  WHEN failures > 0 THEN 'stale'
                                  WHEN uncompared > 0 THEN 'behind'
                                  WHEN last_observed_at IS NULL THEN 'idle'
                                  ELSE 'healthy' END);
END
$$;

-- The newest subagent message created since activation (what capture should have seen): the
-- "capture stalled while messages keep arriving" alert compares it with the newest row. It reads health's
-- index backwards and stops at the first message that qualifies. A timestamp only: callable by anyone
-- with USAGE on the schema, like health.
CREATE FUNCTION @extschema@.subagent_context_last_message_at()
RETURNS timestamp
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_capture_since();
  newest timestamp;
BEGIN
  IF since IS NULL THEN
    RETURN NULL;
  END IF;
  EXECUTE $q$
    SELECT m.created_at FROM @extschema@.task_session_messages AS m
     WHERE m.created_at >= $1 AND @extschema@.subagent_context_may_qualify(m.metadata)
       AND @extschema@.subagent_context_qualifies(@extschema@.subagent_context_parse_metadata(m.metadata))
     ORDER BY m.created_at DESC
     LIMIT 1
  $q$ INTO newest USING since;
  RETURN newest;
END
$$;
