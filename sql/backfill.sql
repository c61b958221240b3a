-- Backfill: derive rows for history written before capture was installed, then publish the activation
-- keys (docs/health.md#activation-keys). Public interface: subagent_context_backfill(). Runs in the caller's
-- transaction; the CLI and the activation migration each call it as a single statement.

-- History as derived rows: for each (session, tool call) the newest qualifying message (created_at,
-- then id), through the same derive_subagent_row as live capture, under the message's own
-- metadata.agent_execution_id when it names one, else the shared sentinel 'unknown' (the transaction
-- setting of live capture means nothing here). `since` limits it to messages created at or after a time
-- (NULL: all of history).
CREATE FUNCTION @extschema@.subagent_history_rows(since timestamp, now_utc timestamp)
RETURNS SETOF @extschema@.subagent_row
LANGUAGE sql STABLE
AS $$
  SELECT DISTINCT ON (d.task_session_id, d.tool_call_id) d.*
    FROM @extschema@.task_session_messages AS m
   CROSS JOIN LATERAL (SELECT @extschema@.subagent_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
   CROSS JOIN LATERAL @extschema@.derive_subagent_row(
           m.task_session_id, m.task_id, m.turn_id, p.doc,
           coalesce(m.created_at, now_utc), coalesce(m.updated_at, now_utc),
           @extschema@.subagent_execution_id(p.doc, NULL)) AS d
   WHERE @extschema@.subagent_may_qualify(m.metadata)
     AND (since IS NULL OR m.created_at >= since)
   ORDER BY d.task_session_id, d.tool_call_id, m.created_at DESC, m.id DESC
$$;

-- Store the derived history rows of (session, tool call) keys that have no row yet, under any execution
-- id: a stored row always wins, and history never duplicates a subagent that live capture, kandev's own
-- writer (real execution ids) or an earlier installation recorded (docs/decisions.md#history-never-duplicates).
-- Returns how many rows were written and the newest created_at among qualifying messages, both from
-- one snapshot of one statement.
CREATE FUNCTION @extschema@.subagent_store_history(since timestamp, OUT inserted bigint, OUT newest timestamp)
LANGUAGE sql VOLATILE
AS $$
  WITH history AS MATERIALIZED (
         SELECT * FROM @extschema@.subagent_history_rows(since, clock_timestamp() AT TIME ZONE 'UTC')),
       -- Keys of that history already recorded, under any execution id. A CTE rather than a correlated
       -- NOT EXISTS on the table: Citus plans no correlated subquery beside a CTE (docs/citus.md).
       recorded AS MATERIALIZED (
         SELECT r.task_session_id, r.tool_call_id FROM @extschema@.task_session_subagents AS r
          WHERE (r.task_session_id, r.tool_call_id) IN (SELECT h.task_session_id, h.tool_call_id FROM history AS h)),
       stored AS (
         -- Named as in capture.sql: id and source, then subagent_row's columns in its order.
         INSERT INTO @extschema@.task_session_subagents (id, source,
           task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, parent_tool_call_id,
           subagent_type, description, agent_id, child_session_id, model, agent_status, tool_status,
           is_async, total_tokens, tool_use_count, duration_ms, observed_at, settled_at, updated_at)
         SELECT gen_random_uuid()::text, 'backfill', h.*
           FROM history AS h
          -- A key too long for a btree entry (~2.7 kB; only a hostile or broken writer produces one)
          -- would abort the whole statement, so one such message would block every backfill and repair.
          -- Leave it out: it stays in health's shortfall, and live capture logs it as a failure (54000).
          WHERE octet_length(h.task_session_id) + octet_length(h.agent_execution_id) + octet_length(h.tool_call_id) <= 2600
            AND octet_length(h.task_id) <= 2600
            AND NOT EXISTS (SELECT 1 FROM recorded AS r
                             WHERE r.task_session_id = h.task_session_id
                               AND r.tool_call_id = h.tool_call_id)
         ON CONFLICT (task_session_id, agent_execution_id, tool_call_id) DO NOTHING
         RETURNING 1)
  SELECT (SELECT count(*) FROM stored), (SELECT max(observed_at) FROM history)
$$;

-- The guarded backfill. Does nothing when both keys are present. Otherwise, in the caller's
-- transaction: derive and store history (steps 1 and 2 share one snapshot), sample capture_since from
-- the clock after the insert, then write both keys with ON CONFLICT DO NOTHING (a present key is never
-- rewritten). A failure rolls all of it back, writes neither key and is reported as a WARNING naming
-- the step and the SQLSTATE; status 'failed' tells the caller, and a rerun retries.
CREATE FUNCTION @extschema@.subagent_context_backfill(
  OUT status text, OUT inserted bigint, OUT capture_since text, OUT backfill_through text,
  OUT failure text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  step    text := 'check activation keys';
  newest  timestamp;
BEGIN
  -- One backfill per schema at a time; a second caller waits, then finds the keys written.
  PERFORM pg_advisory_xact_lock(hashtext('subagent_context_backfill'), '@extschema@'::regnamespace::oid::int);
  capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
  backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
  inserted := 0;
  IF capture_since IS NOT NULL AND backfill_through IS NOT NULL THEN
    status := 'already activated';
    RETURN;
  END IF;

  BEGIN
    step := 'check capture trigger';
    IF @extschema@.subagent_context_trigger_state() IS NULL THEN
      RAISE EXCEPTION 'the capture trigger is not installed; activation would claim coverage that does not exist'
        USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    step := 'derive and store history';
    SELECT s.inserted, s.newest INTO inserted, newest FROM @extschema@.subagent_store_history(NULL) AS s;

    step := 'write activation keys';
    INSERT INTO @extschema@.kandev_meta (key, value)
    VALUES ('subagent_context_capture_since',
            @extschema@.subagent_context_format_key(clock_timestamp() AT TIME ZONE 'UTC')),
           ('subagent_context_backfill_through',
            coalesce(@extschema@.subagent_context_format_key(newest), ''))
    ON CONFLICT (key) DO NOTHING;

    capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
    backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
    status := 'activated';
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'subagent-context: backfill failed at step "%" (SQLSTATE %): %; nothing was written and no activation key was set; run `subagent-context backfill` again once the cause is fixed',
      step, SQLSTATE, SQLERRM;
    status := 'failed';
    failure := format('step "%s" failed (SQLSTATE %s): %s', step, SQLSTATE, SQLERRM);
    inserted := 0;
    capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
    backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
  END;
END
$$;
