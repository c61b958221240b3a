-- The reconciliation (docs/health.md#reconciliation, docs/decisions.md#health-at-any-size): the full
-- comparison of qualifying messages with rows, in bounded steps. Public interface:
-- subagent_context_reconcile() (one step) and the procedure subagent_context_reconcile_all(); the rest is
-- internal. The record it keeps is data (reconciliation.sql); this file is code, replaced by each release,
-- and a reconciliation is trusted only by the code that made it (its `method` is this code's digest).
--
-- What is compared, for a window of creation times [lo, hi):
--   missing: keys (session, tool call) of qualifying messages with a complete identity created in the window
--            that have no row observed since capture_since, under any execution id: health's shortfall;
--   excess:  keys of rows observed in the window with no qualifying message created in it: reported only.
-- A reconciliation walks [capture_since, started_at) in windows of at most `max_messages` entries of
-- health's index on task_session_messages, oldest first, one window per call, each call one statement
-- with its own short snapshot that takes no lock a writer waits for. Health compares [started_at of the
-- newest completed one, now) itself, and re-checks the missing keys it recorded.

-- Keys of the qualifying messages created in [lo, hi), each parsed once, with whether its identity is
-- complete. Inlinable (LANGUAGE sql, STABLE, one SELECT): the window reaches the plan, which reads health's
-- partial index on task_session_messages (message-index.sql).
CREATE FUNCTION @extschema@.subagent_message_keys(lo timestamp, hi timestamp)
RETURNS TABLE (task_session_id text, tool_call_id text, complete boolean)
LANGUAGE sql STABLE
AS $$
  SELECT p.task_session_id,
         @extschema@.subagent_text_field(p.doc, 'tool_call_id'),
         @extschema@.subagent_has_identity(p.task_session_id, p.task_id, p.doc)
    FROM (SELECT m.task_session_id, m.task_id,
                 @extschema@.subagent_parse_metadata_guarded(m.metadata) AS doc
            FROM @extschema@.task_session_messages AS m
           WHERE m.created_at >= lo AND m.created_at < hi
             AND @extschema@.subagent_may_qualify(m.metadata)
          OFFSET 0) AS p  -- OFFSET 0: one parse per message, not one per use of doc
   WHERE @extschema@.subagent_qualifies(p.doc)
$$;

-- The comparison of one window (above). `since` is capture_since: a message's row may have been observed
-- before the window (an earlier message of the same tool call), never before activation.
CREATE FUNCTION @extschema@.subagent_context_compare(since timestamp, lo timestamp, hi timestamp)
RETURNS TABLE (kind text, task_session_id text, tool_call_id text)
LANGUAGE sql STABLE
AS $$
  WITH message_keys AS MATERIALIZED (
         SELECT k.task_session_id, k.tool_call_id, bool_or(k.complete) AS complete
           FROM @extschema@.subagent_message_keys(lo, hi) AS k
          GROUP BY k.task_session_id, k.tool_call_id),
       stored AS MATERIALIZED (
         SELECT DISTINCT r.task_session_id, r.tool_call_id
           FROM message_keys AS k
           JOIN @extschema@.task_session_subagents AS r
             ON r.task_session_id = k.task_session_id AND r.tool_call_id = k.tool_call_id
          WHERE k.complete AND r.observed_at >= since),
       row_keys AS MATERIALIZED (
         SELECT DISTINCT r.task_session_id, r.tool_call_id
           FROM @extschema@.task_session_subagents AS r
          WHERE r.observed_at >= lo AND r.observed_at < hi)
  (SELECT 'missing', k.task_session_id, k.tool_call_id FROM message_keys AS k WHERE k.complete
   EXCEPT
   SELECT 'missing', s.task_session_id, s.tool_call_id FROM stored AS s)
  UNION ALL
  (SELECT 'excess', r.task_session_id, r.tool_call_id FROM row_keys AS r
   EXCEPT
   SELECT 'excess', k.task_session_id, k.tool_call_id FROM message_keys AS k)
$$;

-- The newest completed reconciliation that health may trust: of this activation, by this code.
CREATE FUNCTION @extschema@.subagent_context_reconciled(since timestamp, OUT id bigint, OUT started_at timestamp)
LANGUAGE sql STABLE
AS $$
  SELECT r.id, r.started_at FROM @extschema@.subagent_context_reconciliations AS r
   WHERE r.completed_at IS NOT NULL AND r.capture_since = since AND r.method = '@digest@'
   ORDER BY r.started_at DESC, r.id DESC
   LIMIT 1
$$;

-- One step: advances the reconciliation in progress by one window of at most max_messages index entries,
-- or starts one when none is in progress and the newest completed one started more than min_age ago.
-- One statement: its snapshot lasts as long as the window's parse (BENCHMARKS.md). Concurrent callers
-- do not queue: the second gets 'busy'. On a standby, or in a read-only transaction, it writes nothing
-- ('read_only'): health there reads what the primary recorded.
-- status: 'stepped' (more to do), 'completed' (this step finished it), 'current' (nothing to do yet),
-- 'busy', 'read_only', 'not_activated'.
CREATE FUNCTION @extschema@.subagent_context_reconcile(
  max_messages integer DEFAULT 5000, min_age interval DEFAULT '1 hour',
  OUT status text, OUT reconciliation_id bigint, OUT started_at timestamp, OUT compared_through timestamp,
  OUT messages_compared bigint, OUT missing bigint, OUT excess bigint, OUT completed boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_parse_key(
                       @extschema@.subagent_context_key('subagent_context_capture_since'));
  run @extschema@.subagent_context_reconciliations;
  lo timestamp;
  hi timestamp;
  n bigint;
  now_utc timestamp := clock_timestamp() AT TIME ZONE 'UTC';
BEGIN
  completed := false;
  IF pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' THEN
    status := 'read_only';
    RETURN;
  END IF;
  IF since IS NULL THEN
    status := 'not_activated';
    RETURN;
  END IF;
  IF NOT pg_try_advisory_xact_lock(hashtext('subagent_context_reconcile'), '@extschema@'::regnamespace::oid::int) THEN
    status := 'busy';
    RETURN;
  END IF;

  SELECT r.* INTO run FROM @extschema@.subagent_context_reconciliations AS r
   WHERE r.completed_at IS NULL AND r.capture_since = since AND r.method = '@digest@'
   ORDER BY r.id DESC LIMIT 1;
  IF run.id IS NULL THEN
    SELECT r.* INTO run FROM @extschema@.subagent_context_reconciliations AS r
     WHERE r.completed_at IS NOT NULL AND r.capture_since = since AND r.method = '@digest@'
     ORDER BY r.started_at DESC, r.id DESC LIMIT 1;
    IF run.id IS NOT NULL AND run.started_at > now_utc - min_age THEN
      status := 'current';
      completed := true;
    ELSE
      INSERT INTO @extschema@.subagent_context_reconciliations AS r
        (capture_since, started_at, method, compared_through, updated_at)
      VALUES (since, greatest(now_utc, since), '@digest@', since, now_utc)
      RETURNING r.* INTO run;
    END IF;
  END IF;

  IF status IS NULL THEN
    -- The window: from where the last step stopped to the creation time of the entry max_messages
    -- further on (messages created at one instant are never split), or to the end of this run.
    lo := run.compared_through;
    SELECT m.created_at INTO hi FROM @extschema@.task_session_messages AS m
     WHERE m.created_at >= lo AND m.created_at < run.started_at AND @may_qualify(m.metadata)@
     ORDER BY m.created_at OFFSET greatest(max_messages, 1) LIMIT 1;
    IF hi = lo THEN
      SELECT min(m.created_at) INTO hi FROM @extschema@.task_session_messages AS m
       WHERE m.created_at > lo AND m.created_at < run.started_at AND @may_qualify(m.metadata)@;
    END IF;
    hi := coalesce(hi, run.started_at);

    INSERT INTO @extschema@.subagent_context_reconciliation_keys AS k (reconciliation_id, kind, task_session_id, tool_call_id)
    SELECT run.id, c.kind, c.task_session_id, c.tool_call_id
      FROM @extschema@.subagent_context_compare(since, lo, hi) AS c
    ON CONFLICT DO NOTHING;
    SELECT count(*) INTO n FROM @extschema@.task_session_messages AS m
     WHERE m.created_at >= lo AND m.created_at < hi AND @may_qualify(m.metadata)@;

    completed := hi >= run.started_at;
    UPDATE @extschema@.subagent_context_reconciliations AS r
       SET compared_through = hi, messages_compared = r.messages_compared + n, steps = r.steps + 1,
           updated_at = clock_timestamp() AT TIME ZONE 'UTC',
           completed_at = CASE WHEN completed THEN clock_timestamp() AT TIME ZONE 'UTC' END
     WHERE r.id = run.id
    RETURNING r.* INTO run;
    IF completed THEN
      -- Only the newest completed reconciliation is read; the rest (and their keys) go.
      DELETE FROM @extschema@.subagent_context_reconciliations AS r WHERE r.id <> run.id;
    END IF;
    status := CASE WHEN completed THEN 'completed' ELSE 'stepped' END;
  END IF;

  reconciliation_id := run.id;
  started_at := run.started_at;
  compared_through := run.compared_through;
  messages_compared := run.messages_compared;
  SELECT count(*) FILTER (WHERE k.kind = 'missing'), count(*) FILTER (WHERE k.kind = 'excess')
    INTO missing, excess
    FROM @extschema@.subagent_context_reconciliation_keys AS k WHERE k.reconciliation_id = run.id;
END
$$;

-- A complete reconciliation now, committing after each step (so no snapshot outlives a step): for plain
-- node-pg-migrate's activation and for SQL schedulers (CALL it outside a transaction block). The CLI runs
-- the same steps itself, to show progress (`health --full`). Stops early when another session is
-- reconciling ('busy') or the server is read-only.
CREATE PROCEDURE @extschema@.subagent_context_reconcile_all()
LANGUAGE plpgsql
AS $$
DECLARE
  step record;
BEGIN
  LOOP
    SELECT * INTO step FROM @extschema@.subagent_context_reconcile(5000, '0');
    COMMIT;
    EXIT WHEN step.status IN ('completed', 'current', 'busy', 'read_only', 'not_activated');
  END LOOP;
END
$$;
