-- Health: is capture complete since activation? From the database alone (docs/health.md). Public
-- interface: subagent_context_health(), one row that dashboards, the metrics endpoint, the report and
-- the CLI all show, and whose `status` is the one verdict; subagent_context_repair(). The rest is internal.
--
-- shortfall is the only alarm: qualifying messages (full identity) created since capture_since whose
-- (session, tool call) has no row observed since then. excess is the reverse (rows with no qualifying
-- message since then): reported, never an alarm. Two separate anti-joins, never netted.

-- Keys of qualifying messages created at or after `since`, each parsed once, with whether its identity
-- is complete (what capture must have stored: the shortfall's side). It parses with the catching
-- parser (parse.sql), whose result is subagent_parse_metadata's: on PostgreSQL 16+ that one validates,
-- then parses again, behind a bracket count, and one catching parse is cheaper (BENCHMARKS.md, health). Inlinable (LANGUAGE sql, STABLE, one SELECT), so a caller's
-- `since` reaches the plan: a recent window reads only the messages created since then, through
-- subagent_context_recent_messages_idx (message-index.sql).
CREATE FUNCTION @extschema@.subagent_message_keys(since timestamp)
RETURNS TABLE (task_session_id text, tool_call_id text, complete boolean)
LANGUAGE sql STABLE
AS $$
  SELECT p.task_session_id,
         @extschema@.subagent_text_field(p.doc, 'tool_call_id'),
         @extschema@.subagent_has_identity(p.task_session_id, p.task_id, p.doc)
    FROM (SELECT m.task_session_id, m.task_id,
                 @extschema@.subagent_parse_metadata_guarded(m.metadata) AS doc
            FROM @extschema@.task_session_messages AS m
           WHERE m.created_at >= since
             AND @extschema@.subagent_may_qualify(m.metadata)
          OFFSET 0) AS p  -- OFFSET 0: one parse per message, not one per use of doc
   WHERE @extschema@.subagent_qualifies(p.doc)
$$;

CREATE FUNCTION @extschema@.subagent_row_keys(since timestamp)
RETURNS TABLE (task_session_id text, tool_call_id text)
LANGUAGE sql STABLE
AS $$
  SELECT r.task_session_id, r.tool_call_id
    FROM @extschema@.task_session_subagents AS r
   WHERE r.observed_at >= since
$$;

-- shortfall and excess for one window, from one pass over the messages: the message keys serve both
-- anti-joins. The health function runs this with EXECUTE, so it is planned for the actual window start.
CREATE FUNCTION @extschema@.subagent_context_window(since timestamp)
RETURNS TABLE (shortfall bigint, excess bigint)
LANGUAGE sql STABLE
AS $$
  WITH message_keys AS MATERIALIZED (SELECT * FROM @extschema@.subagent_message_keys(since)),
       row_keys AS MATERIALIZED (SELECT * FROM @extschema@.subagent_row_keys(since))
  SELECT (SELECT count(*) FROM (SELECT k.task_session_id, k.tool_call_id FROM message_keys AS k WHERE k.complete
                                EXCEPT
                                SELECT r.task_session_id, r.tool_call_id FROM row_keys AS r) AS missing),
         (SELECT count(*) FROM (SELECT r.task_session_id, r.tool_call_id FROM row_keys AS r
                                EXCEPT
                                SELECT k.task_session_id, k.tool_call_id FROM message_keys AS k) AS extra)
$$;

CREATE FUNCTION @extschema@.subagent_context_health(
  OUT activated boolean, OUT capture_since text, OUT backfill_through text,
  OUT shortfall bigint, OUT excess bigint, OUT last_observed_at timestamp,
  OUT trigger_enabled boolean, OUT failures bigint, OUT collisions bigint,
  OUT status text, OUT installed_version text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp;
  trigger_state "char";
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
  status := CASE WHEN to_regprocedure('@extschema@.capture_subagent_message()') IS NULL
                   OR to_regclass('@extschema@.task_session_subagents') IS NULL THEN 'not_installed'
                 WHEN trigger_state IS NULL THEN 'trigger_missing'
                 WHEN NOT trigger_enabled THEN 'trigger_disabled'
                 WHEN NOT activated THEN 'not_activated' END;
  IF status = 'not_installed' THEN
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

  -- EXECUTE: planned with the actual window start, never a generic plan that must fit every window.
  EXECUTE 'SELECT w.shortfall, w.excess FROM @extschema@.subagent_context_window($1) AS w'
     INTO shortfall, excess USING since;

  SELECT max(r.observed_at) INTO last_observed_at
    FROM @extschema@.task_session_subagents AS r WHERE r.observed_at >= since;

  SELECT count(*) INTO failures
    FROM @extschema@.subagent_context_failures AS f WHERE f.occurred_at >= since;

  status := coalesce(status, CASE WHEN shortfall > 0 THEN 'shortfall'
                                  WHEN last_observed_at IS NULL THEN 'idle'
                                  ELSE 'healthy' END);
END
$$;

-- Repair: store the rows the shortfall lists as missing, re-derived from the messages created since
-- capture_since through the same derivation as capture and the same rule as the backfill (source
-- 'backfill'; keys with a row under any execution id are left alone). Existing rows are never touched.
CREATE FUNCTION @extschema@.subagent_context_repair(OUT repaired bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_parse_key(
                       @extschema@.subagent_context_key('subagent_context_capture_since'));
BEGIN
  IF since IS NULL THEN
    RAISE EXCEPTION 'subagent-context is not activated in schema %: there is no capture_since key', '@extschema@'
      USING HINT = 'Run `subagent-context up` (or `subagent-context backfill`) first.',
            ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  SELECT s.inserted INTO repaired FROM @extschema@.subagent_store_history(since) AS s;
END
$$;
