-- Health (SPEC §8): is capture complete since activation? From the database alone; dashboards call
-- subagent_context_health() and the CLI prints it.
--
-- shortfall is the only alarm: qualifying messages (full identity) created since capture_since whose
-- (session, tool call) has no row observed since then. excess is the reverse (rows with no qualifying
-- message since then): reported, never an alarm. Two separate anti-joins, never netted.

-- Keys of qualifying messages created at or after `since`. identity_only: only those with a complete
-- identity (what capture must have stored).
CREATE OR REPLACE FUNCTION @extschema@.subagent_message_keys(since timestamp, identity_only boolean)
RETURNS TABLE (task_session_id text, tool_call_id text)
LANGUAGE sql STABLE
AS $$
  SELECT m.task_session_id, @extschema@.subagent_text(p.doc -> 'tool_call_id')
    FROM @extschema@.task_session_messages AS m
   CROSS JOIN LATERAL (SELECT @extschema@.subagent_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
   WHERE m.created_at >= since
     AND @extschema@.subagent_may_qualify(m.metadata)
     AND @extschema@.subagent_qualifies(p.doc)
     AND (NOT identity_only OR @extschema@.subagent_has_identity(m.task_session_id, m.task_id, p.doc))
$$;

CREATE OR REPLACE FUNCTION @extschema@.subagent_row_keys(since timestamp)
RETURNS TABLE (task_session_id text, tool_call_id text)
LANGUAGE sql STABLE
AS $$
  SELECT r.task_session_id, r.tool_call_id
    FROM @extschema@.task_session_subagents AS r
   WHERE r.observed_at >= since
$$;

CREATE OR REPLACE FUNCTION @extschema@.subagent_context_health(
  OUT activated boolean, OUT capture_since text, OUT backfill_through text,
  OUT shortfall bigint, OUT excess bigint, OUT last_observed_at timestamp,
  OUT trigger_enabled boolean, OUT failures bigint, OUT collisions bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp;
BEGIN
  capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
  backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
  since := @extschema@.subagent_context_parse_key(capture_since);
  activated := since IS NOT NULL;

  -- 'O' fires in normal sessions, 'A' always; 'D' is disabled and 'R' fires only on replicas.
  trigger_enabled := coalesce((SELECT t.tgenabled IN ('O', 'A') FROM pg_trigger AS t
                                WHERE t.tgrelid = '@extschema@.task_session_messages'::regclass
                                  AND t.tgname = 'subagent_context_capture'), false);

  -- Rows that share (session, tool call) with a row of another execution (SPEC §5).
  SELECT coalesce(sum(n), 0) INTO collisions
    FROM (SELECT count(*) AS n FROM @extschema@.task_session_subagents
           GROUP BY task_session_id, tool_call_id HAVING count(*) > 1) AS c;

  IF NOT activated THEN
    RETURN;  -- nothing to compare against: shortfall, excess, last_observed_at and failures stay NULL
  END IF;

  SELECT count(*) INTO shortfall FROM (
    SELECT * FROM @extschema@.subagent_message_keys(since, true)
    EXCEPT
    SELECT * FROM @extschema@.subagent_row_keys(since)) AS missing;

  SELECT count(*) INTO excess FROM (
    SELECT * FROM @extschema@.subagent_row_keys(since)
    EXCEPT
    SELECT * FROM @extschema@.subagent_message_keys(since, false)) AS extra;

  SELECT max(r.observed_at) INTO last_observed_at
    FROM @extschema@.task_session_subagents AS r WHERE r.observed_at >= since;

  SELECT count(*) INTO failures
    FROM @extschema@.subagent_context_failures AS f WHERE f.occurred_at >= since;
END
$$;

-- Repair: store the rows the shortfall lists as missing, re-derived from message history through the
-- same derivation as capture (source 'backfill', execution 'unknown'). Existing rows are never touched.
CREATE OR REPLACE FUNCTION @extschema@.subagent_context_repair(OUT repaired bigint)
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
  SELECT s.inserted INTO repaired FROM @extschema@.subagent_store_history(since, since) AS s;
END
$$;
