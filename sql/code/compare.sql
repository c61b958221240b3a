-- The comparison of qualifying messages with rows, and the record of the keys it finds missing
-- (docs/health.md#reconciliation). Internal. Shared by the reconciliation's steps (code/reconcile.sql),
-- health (code/health.sql) and repair (code/repair.sql). What is compared, and why it is bounded:
-- code/reconcile.sql's header.

-- The comparison of one window, as one statement: on Citus each shard compares its messages with its rows
-- under one snapshot, so a message and the row its capture wrote in the same transaction are seen together.
-- Missing keys are probed one by one through the unique key (execution 'unknown') and the index of known
-- executions; excess rows are found by grouping the window's rows with its messages by key. Either way
-- the cost is per key, whatever the size of its session. missing_only (repair's first look, which keeps
-- no excess): the first part alone, which Citus runs as one query on every shard (with the excess part,
-- each part is a distributed subplan of its own and the union is planned on the coordinator: 0.5.0,
-- with nothing to compare, 190 ms against 500 ms on a loaded machine).
CREATE FUNCTION @extschema@.subagent_context_compare(since timestamp, lo timestamp, hi timestamp,
  missing_only boolean DEFAULT false)
RETURNS TABLE (kind text, task_session_id text, tool_call_id text, message_created_at timestamp)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  -- EXECUTE: planned for the actual window (a recent one reads only the newest entries of the indexes).
  -- A recent comparison (hi = 'infinity': health, repair's first look) does not parse a document larger
  -- than capture parses inside a write: capture recorded it as deferred (a failure, counted by health) and
  -- repair stores its row, so health's cost is bounded in documents' size as well as in their count. A
  -- window of the reconciliation parses every document (docs/reliability.md#large-documents).
  RETURN QUERY EXECUTE $q$
    SELECT 'missing'::text, k.task_session_id, k.call, max(k.created_at)
      FROM (SELECT m.task_session_id, m.created_at, c.call
              FROM @extschema@.task_session_messages AS m
             CROSS JOIN LATERAL (SELECT @extschema@.subagent_context_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
             CROSS JOIN LATERAL (SELECT @extschema@.subagent_context_text_field(p.doc, 'tool_call_id') AS call) AS c
             WHERE m.created_at >= $2 AND m.created_at < $3 AND @extschema@.subagent_context_may_qualify(m.metadata)
               AND ($4 IS NULL OR octet_length(m.metadata) <= $4)
               AND @extschema@.subagent_context_qualifies(p.doc)
               AND @extschema@.subagent_context_has_identity(m.task_session_id, m.task_id, p.doc)) AS k
      LEFT JOIN LATERAL (
             SELECT true AS found FROM @extschema@.task_session_subagents AS r
              WHERE r.task_session_id = k.task_session_id AND r.agent_execution_id = 'unknown'
                AND r.tool_call_id = k.call AND r.observed_at >= $1
             UNION ALL
             SELECT true FROM @extschema@.task_session_subagents AS r
              WHERE r.task_session_id = k.task_session_id AND r.tool_call_id = k.call
                AND r.agent_execution_id <> 'unknown' AND r.observed_at >= $1
             LIMIT 1) AS f ON true
     WHERE f.found IS NULL
     GROUP BY k.task_session_id, k.call
  $q$ || CASE WHEN missing_only THEN '' ELSE $q$
    UNION ALL
    SELECT 'excess', g.task_session_id, g.call, NULL
      FROM (SELECT x.task_session_id, x.call, bool_or(x.is_message) AS has_message
              FROM (SELECT r.task_session_id, r.tool_call_id AS call, false AS is_message
                      FROM @extschema@.task_session_subagents AS r
                     WHERE r.observed_at >= $2 AND r.observed_at < $3
                    UNION ALL
                    SELECT m.task_session_id, @extschema@.subagent_context_text_field(p.doc, 'tool_call_id'), true
                      FROM @extschema@.task_session_messages AS m
                     CROSS JOIN LATERAL (SELECT @extschema@.subagent_context_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
                     WHERE m.created_at >= $2 AND m.created_at < $3 AND @extschema@.subagent_context_may_qualify(m.metadata)
                       AND ($4 IS NULL OR octet_length(m.metadata) <= $4)
                       AND @extschema@.subagent_context_qualifies(p.doc)) AS x
             GROUP BY x.task_session_id, x.call) AS g
     WHERE NOT g.has_message
       -- A row whose message may be one of the documents not parsed here is not called excess.
       AND NOT ($4 IS NOT NULL AND EXISTS (
             SELECT 1 FROM @extschema@.task_session_messages AS m
              WHERE m.task_session_id = g.task_session_id AND m.created_at >= $2 AND m.created_at < $3
                AND @extschema@.subagent_context_may_qualify(m.metadata) AND octet_length(m.metadata) > $4))
  $q$ END USING since, lo, hi, CASE WHEN hi = 'infinity' THEN @extschema@.subagent_context_capture_max_bytes() END;
END
$$;

-- Records missing keys that a comparison found (health, a reconciliation step, repair): new ones from now on,
-- known ones confirmed now, with the newest creation time of their messages. In a stable order, so that
-- concurrent callers never deadlock. Internal.
CREATE FUNCTION @extschema@.subagent_context_record_missing(since timestamp, sessions text[], calls text[], instants timestamp[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  now_utc timestamp := clock_timestamp() AT TIME ZONE 'UTC';
BEGIN
  INSERT INTO @extschema@.subagent_context_missing_keys AS k
    (capture_since, task_session_id, tool_call_id, message_created_at, found_at, confirmed_at)
  SELECT DISTINCT ON (md5(u.s || E'\x1f' || u.c)) since, u.s, u.c, u.t, now_utc, now_utc
    FROM unnest(sessions, calls, instants) AS u(s, c, t)
   ORDER BY md5(u.s || E'\x1f' || u.c), u.t DESC
  ON CONFLICT (capture_since, md5(task_session_id || E'\x1f' || tool_call_id)) DO UPDATE
    SET message_created_at = greatest(k.message_created_at, EXCLUDED.message_created_at), confirmed_at = now_utc;
END
$$;

-- The missing keys of everything written since `lo` (the frontier of the newest completed reconciliation,
-- or activation when there is none), recorded where the server can write (a standby reads the primary's
-- record): repair's first look, after the CLI has brought the reconciliation up to now, so it is short. It
-- keeps no excess, so it looks for none (0.5.0). Not health's: health compares a bounded part
-- (subagent_context_recent_bounds()). Internal.
CREATE FUNCTION @extschema@.subagent_context_compare_recent(since timestamp, lo timestamp)
RETURNS TABLE (kind text, task_session_id text, tool_call_id text, message_created_at timestamp)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  recent record;
  written bigint;
BEGIN
  -- Nothing that may be a subagent call written since `lo` (right after the CLI's complete comparison):
  -- nothing to compare. One probe of health's index, where the comparison's own plan on Citus is a
  -- statement on every shard several times its length.
  EXECUTE $q$
    SELECT count(*) FROM (SELECT 1 FROM @extschema@.task_session_messages AS m
                           WHERE m.created_at >= $1 AND @extschema@.subagent_context_may_qualify(m.metadata) LIMIT 1) AS w
  $q$ INTO written USING coalesce(lo, since);
  IF written = 0 THEN
    RETURN;
  END IF;
  SELECT array_agg(c.kind) AS kinds, array_agg(c.task_session_id) AS sessions, array_agg(c.tool_call_id) AS calls,
         array_agg(c.message_created_at) AS instants
    INTO recent
    FROM @extschema@.subagent_context_compare(since, coalesce(lo, since), 'infinity', missing_only => true) AS c;
  IF 'missing' = ANY (recent.kinds) AND NOT @extschema@.subagent_context_read_only() THEN
    PERFORM @extschema@.subagent_context_record_missing(since, array_agg(u.s), array_agg(u.c), array_agg(u.t))
       FROM unnest(recent.kinds, recent.sessions, recent.calls, recent.instants) AS u(k, s, c, t)
      WHERE u.k = 'missing';
  END IF;
  RETURN QUERY SELECT u.k, u.s, u.c, u.t FROM unnest(recent.kinds, recent.sessions, recent.calls, recent.instants) AS u(k, s, c, t);
END
$$;

-- Which of the given recorded keys are resolved: they have a row observed since `since` under any execution
-- id (looked up through the unique key, execution 'unknown', and the index of known executions), or, where
-- their instant is given, no message of their session is left at the instant it was seen that may be a
-- subagent call (deleted, or rewritten as something else). Its document is not read (health's index
-- holds exactly such messages): a key is never dropped on a guess, and one whose message became another
-- call stays until a reconciliation compares that instant again (--full). Per key, two or three index
-- probes and no document read, whatever the size of its session. On Citus the keys travel as
-- one intermediate result (MATERIALIZED) that each worker joins once: it plans no lateral probe from a
-- list to a distributed table. Internal.
CREATE FUNCTION @extschema@.subagent_context_resolved_keys(since timestamp, given_sessions text[], given_calls text[],
  given_instants timestamp[], OUT sessions text[], OUT calls text[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF given_sessions IS NULL THEN
    RETURN;
  END IF;
  IF @extschema@.subagent_context_topology() <> 'citus' THEN
    EXECUTE $q$
      SELECT array_agg(u.s), array_agg(u.c)
        FROM unnest($1::text[], $2::text[], $3::timestamp[]) AS u(s, c, t)
        LEFT JOIN LATERAL (
               SELECT true AS found FROM @extschema@.task_session_subagents AS r
                WHERE r.task_session_id = u.s AND r.agent_execution_id = 'unknown' AND r.tool_call_id = u.c
                  AND r.observed_at >= $4
               UNION ALL
               SELECT true FROM @extschema@.task_session_subagents AS r
                WHERE r.task_session_id = u.s AND r.tool_call_id = u.c AND r.agent_execution_id <> 'unknown'
                  AND r.observed_at >= $4
               LIMIT 1) AS r ON true
        LEFT JOIN LATERAL (
               SELECT true AS found FROM @extschema@.task_session_messages AS m
                WHERE r.found IS NULL AND u.t IS NOT NULL
                  AND m.task_session_id = u.s AND m.created_at = u.t AND @extschema@.subagent_context_may_qualify(m.metadata)
               LIMIT 1) AS a ON true
       WHERE r.found OR (u.t IS NOT NULL AND a.found IS NULL)
    $q$ INTO sessions, calls USING given_sessions, given_calls, given_instants, since;
    RETURN;
  END IF;
  EXECUTE $q$
    WITH given AS MATERIALIZED (SELECT u.s, u.c, u.t FROM unnest($1::text[], $2::text[], $3::timestamp[]) AS u(s, c, t)),
         stored AS (
           SELECT k.s, k.c FROM given AS k
             JOIN @extschema@.task_session_subagents AS r
               ON r.task_session_id = k.s AND r.agent_execution_id = 'unknown' AND r.tool_call_id = k.c
            WHERE r.observed_at >= $4
           UNION
           SELECT k.s, k.c FROM given AS k
             JOIN @extschema@.task_session_subagents AS r
               ON r.task_session_id = k.s AND r.tool_call_id = k.c AND r.agent_execution_id <> 'unknown'
            WHERE r.observed_at >= $4),
         alive AS (
           SELECT DISTINCT k.s, k.c FROM given AS k
             JOIN @extschema@.task_session_messages AS m ON m.task_session_id = k.s AND m.created_at = k.t
            WHERE @extschema@.subagent_context_may_qualify(m.metadata))
    SELECT array_agg(x.s), array_agg(x.c)
      FROM (SELECT k.s, k.c FROM given AS k WHERE k.t IS NOT NULL
            EXCEPT SELECT a.s, a.c FROM alive AS a
            UNION
            SELECT x.s, x.c FROM stored AS x) AS x
  $q$ INTO sessions, calls USING given_sessions, given_calls, given_instants, since;
END
$$;

-- Drops resolved recorded missing keys (subagent_context_resolved_keys()). Internal.
CREATE FUNCTION @extschema@.subagent_context_forget_missing(since timestamp, sessions text[], calls text[])
RETURNS void
LANGUAGE sql VOLATILE
AS $$
  -- Each key found through the unique index (= ANY of the digests, as repair's batch does): as a join, the
  -- planner may hash the whole record.
  DELETE FROM @extschema@.subagent_context_missing_keys AS k
   WHERE k.capture_since = since
     AND md5(k.task_session_id || E'\x1f' || k.tool_call_id) = ANY (ARRAY(SELECT md5(u.s || E'\x1f' || u.c) FROM unnest(sessions, calls) AS u(s, c)))
     AND k.task_session_id || E'\x1f' || k.tool_call_id = ANY (ARRAY(SELECT u.s || E'\x1f' || u.c FROM unnest(sessions, calls) AS u(s, c)))
$$;
