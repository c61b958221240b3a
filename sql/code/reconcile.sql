-- The reconciliation (docs/health.md#reconciliation, docs/decisions.md#health-at-any-size): the full
-- comparison of qualifying messages with rows, in bounded steps. Public interface (installing role only):
-- subagent_context_reconcile() (one step) and the procedure subagent_context_reconcile_all(); the rest is
-- internal. Its record is data (data/reconciliation-record.sql); a run is trusted only by the code that made it (its
-- `method` is the installed code's digest).
--
-- What is compared, for a window of creation times [lo, hi):
--   missing: keys (session, tool call) of qualifying messages with a complete identity created in the window
--            that have no row observed since capture_since, under any execution id: health's shortfall;
--   excess:  keys of rows observed in the window with no qualifying message created in it: reported only.
-- A run walks [capture_since, started_at) oldest first, one window of at most subagent_context_batch_messages()
-- entries of health's index per call, each call one short statement that takes no lock a writer waits for.
-- A completed run is then kept current by the same steps (its `compared_through` moves on past its
-- started_at over what was written since: the frontier); health compares only what lies past the frontier,
-- at most subagent_context_health_messages() of it, and counts the rest (docs/health.md#bounded-in-every-state).
-- No window reaches closer to now than subagent_context_settle() (one second): a message created just before
-- a step, in a transaction that commits just after it, is compared by a later step, never skipped.

-- The code that compares here: the installed code layer's digest (a run by other code is not trusted).
CREATE FUNCTION @extschema@.subagent_context_method()
RETURNS text LANGUAGE sql STABLE
AS $$ SELECT coalesce((SELECT i.code_digest FROM @extschema@.subagent_context_installation() AS i), 'unrecorded') $$;

-- The newest completed reconciliation that health may trust: of this activation, by this code.
-- compared_through: its frontier (messages created before it are compared; at least started_at).
CREATE FUNCTION @extschema@.subagent_context_reconciled(since timestamp, OUT id bigint, OUT started_at timestamp,
  OUT compared_through timestamp)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  SELECT r.id, r.started_at, r.compared_through INTO id, started_at, compared_through
    FROM @extschema@.subagent_context_reconciliations AS r
   WHERE r.completed_at IS NOT NULL AND r.capture_since = since AND r.method = @extschema@.subagent_context_method()
   ORDER BY r.started_at DESC, r.id DESC
   LIMIT 1;
END
$$;

-- The comparison's window after `lo`: up to the end of the instant of the `batch`-th candidate message
-- (messages created at one instant are never split), or to `hi`. n: the candidates in it. Internal.
CREATE FUNCTION @extschema@.subagent_context_window(lo timestamp, hi timestamp, batch integer,
  OUT window_end timestamp, OUT n bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  last timestamp;
BEGIN
  EXECUTE $q$
    SELECT max(w.created_at), count(*)
      FROM (SELECT m.created_at FROM @extschema@.task_session_messages AS m
             WHERE m.created_at >= $1 AND m.created_at < $2 AND @extschema@.subagent_context_may_qualify(m.metadata)
             ORDER BY m.created_at LIMIT $3) AS w
  $q$ INTO last, n USING lo, hi, batch;
  window_end := CASE WHEN n < batch THEN hi ELSE least(last + interval '1 microsecond', hi) END;
END
$$;

-- Compares one window [lo, hi) for run `run_id`: its missing keys recorded, its excess keys kept with the
-- run. Internal.
CREATE FUNCTION @extschema@.subagent_context_compare_window(since timestamp, run_id bigint, lo timestamp, hi timestamp)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  found record;
BEGIN
  SELECT array_agg(c.task_session_id) FILTER (WHERE c.kind = 'missing') AS sessions,
         array_agg(c.tool_call_id) FILTER (WHERE c.kind = 'missing') AS calls,
         array_agg(c.message_created_at) FILTER (WHERE c.kind = 'missing') AS instants,
         array_agg(c.task_session_id) FILTER (WHERE c.kind = 'excess') AS excess_sessions,
         array_agg(c.tool_call_id) FILTER (WHERE c.kind = 'excess') AS excess_calls
    INTO found
    FROM @extschema@.subagent_context_compare(since, lo, hi) AS c;
  IF found.sessions IS NOT NULL THEN
    PERFORM @extschema@.subagent_context_record_missing(since, found.sessions, found.calls, found.instants);
  END IF;
  INSERT INTO @extschema@.subagent_context_reconciliation_keys (reconciliation_id, kind, task_session_id, tool_call_id)
  SELECT run_id, 'excess', u.s, u.c FROM unnest(found.excess_sessions, found.excess_calls) AS u(s, c)
  ON CONFLICT DO NOTHING;
END
$$;

-- One step, the writer of the whole comparison (health itself writes nothing): one window of at most
-- subagent_context_batch_messages() candidates. First the frontier of the newest completed run moves on
-- over what was written since (so health's own part stays small, whatever a burst wrote); when it is
-- current, the reconciliation in progress advances, or a new one starts when the newest completed one
-- started more than subagent_context_reconcile_every() ago. `not_before` (health --full, repair): only a
-- run that started at or after it counts; one in progress that started before is superseded by a new one,
-- so everything written up to that moment is compared; the frontier waits meanwhile. One statement: its
-- snapshot lasts as long as one window. It never waits on another session: concurrent callers get 'busy'
-- (an advisory lock tried, not waited for), and a row another session holds (repair forgetting a key)
-- stops it within lock_timeout. On a standby, or in a read-only transaction, it writes nothing
-- ('read_only'): health there reads what the primary recorded.
-- status: 'stepped' (more to do), 'completed' (this step finished it), 'current' (nothing to do yet),
-- 'busy', 'read_only', 'not_activated'. missing: the keys recorded missing now;
-- excess: the run's.
CREATE FUNCTION @extschema@.subagent_context_reconcile(
  not_before timestamp DEFAULT NULL,
  OUT status text, OUT reconciliation_id bigint, OUT started_at timestamp, OUT compared_through timestamp,
  OUT messages_compared bigint, OUT missing bigint, OUT excess bigint, OUT completed boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off  -- every read is bounded by an index, whatever the statistics say (code/health.sql)
SET jit = off
SET lock_timeout = '1s'
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_capture_since();
  this_method text := @extschema@.subagent_context_method();
  batch integer := @extschema@.subagent_context_batch_messages();
  run @extschema@.subagent_context_reconciliations;
  done @extschema@.subagent_context_reconciliations;
  w record;
  now_utc timestamp := clock_timestamp() AT TIME ZONE 'UTC';
  settled timestamp := (clock_timestamp() AT TIME ZONE 'UTC') - @extschema@.subagent_context_settle();
BEGIN
  completed := false;
  IF @extschema@.subagent_context_read_only() THEN
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

  SELECT r.* INTO done FROM @extschema@.subagent_context_reconciliations AS r
   WHERE r.completed_at IS NOT NULL AND r.capture_since = since AND r.method = this_method
   ORDER BY r.started_at DESC, r.id DESC LIMIT 1;

  -- The recorded keys health checks again (the newest), where they are resolved now, leave the record.
  SELECT array_agg(k.task_session_id) AS sessions, array_agg(k.tool_call_id) AS calls, array_agg(k.message_created_at) AS instants
    INTO w
    FROM (SELECT k.task_session_id, k.tool_call_id, k.message_created_at FROM @extschema@.subagent_context_missing_keys AS k
           WHERE k.capture_since = since
           ORDER BY k.message_created_at DESC LIMIT @extschema@.subagent_context_health_messages()) AS k;
  IF w.sessions IS NOT NULL THEN
    SELECT * INTO w FROM @extschema@.subagent_context_resolved_keys(since, w.sessions, w.calls, w.instants);
    IF w.sessions IS NOT NULL THEN
      PERFORM @extschema@.subagent_context_forget_missing(since, w.sessions, w.calls);
    END IF;
  END IF;

  -- The frontier first (not for --full, whose own run covers everything up to its call).
  IF done.id IS NOT NULL AND not_before IS NULL AND done.compared_through < settled THEN
    SELECT * INTO w FROM @extschema@.subagent_context_window(done.compared_through, settled, batch);
    -- Nothing written past it: it stays (a step with nothing to do writes nothing), and health's part is
    -- the messages after it, which are none older than the settling time.
    IF w.n > 0 THEN
      PERFORM @extschema@.subagent_context_compare_window(since, done.id, done.compared_through, w.window_end);
      UPDATE @extschema@.subagent_context_reconciliations AS r
         SET compared_through = w.window_end, messages_compared = r.messages_compared + w.n, steps = r.steps + 1,
             updated_at = clock_timestamp() AT TIME ZONE 'UTC'
       WHERE r.id = done.id
      RETURNING r.* INTO done;
    END IF;
    IF w.window_end < settled THEN
      status := 'stepped';
      run := done;
    END IF;
  END IF;

  IF status IS NULL THEN
    SELECT r.* INTO run FROM @extschema@.subagent_context_reconciliations AS r
     WHERE r.completed_at IS NULL AND r.capture_since = since AND r.method = this_method
     ORDER BY r.id DESC LIMIT 1;
    IF run.id IS NOT NULL AND run.started_at < not_before THEN
      DELETE FROM @extschema@.subagent_context_reconciliations AS r WHERE r.id = run.id;  -- superseded
      run := NULL;
    END IF;
    IF run.id IS NULL THEN
      IF done.id IS NOT NULL AND (done.started_at >= not_before
                                  OR (not_before IS NULL AND done.started_at > now_utc - @extschema@.subagent_context_reconcile_every())) THEN
        status := 'current';
        completed := true;
        run := done;
      ELSE
        INSERT INTO @extschema@.subagent_context_reconciliations AS r
          (capture_since, started_at, method, compared_through, updated_at)
        VALUES (since, greatest(now_utc, since), this_method, since, now_utc)
        RETURNING r.* INTO run;
      END IF;
    END IF;
  END IF;

  IF status IS NULL THEN
    -- The last window is compared no sooner than the settling time after the run's start, so that a write
    -- still in flight at its start has committed (a run of a small store waits here, at most that long:
    -- each statement of this function takes a new snapshot).
    SELECT * INTO w FROM @extschema@.subagent_context_window(run.compared_through, run.started_at, batch);
    IF w.window_end >= run.started_at AND run.started_at > settled THEN
      -- (never longer: a run that starts at a capture_since in the future has nothing in flight to wait for)
      PERFORM pg_sleep(extract(epoch FROM least(run.started_at - settled, @extschema@.subagent_context_settle()))::float8);
      SELECT * INTO w FROM @extschema@.subagent_context_window(run.compared_through, run.started_at, batch);
    END IF;
    PERFORM @extschema@.subagent_context_compare_window(since, run.id, run.compared_through, w.window_end);
    completed := w.window_end >= run.started_at;
    -- A completed run's frontier starts where the previous one's had reached: what lies between was
    -- compared by that one's frontier steps, with its misses recorded.
    UPDATE @extschema@.subagent_context_reconciliations AS r
       SET compared_through = CASE WHEN completed THEN greatest(w.window_end, done.compared_through) ELSE w.window_end END,
           messages_compared = r.messages_compared + w.n, steps = r.steps + 1,
           updated_at = clock_timestamp() AT TIME ZONE 'UTC',
           completed_at = CASE WHEN completed THEN clock_timestamp() AT TIME ZONE 'UTC' END
     WHERE r.id = run.id
    RETURNING r.* INTO run;
    IF completed THEN
      -- Only the newest completed run is read; the rest (and their keys) go. So do the missing keys that
      -- this run compared after they were last found missing and did not find again (their message no
      -- longer qualifies, or their row exists), and those of other activations. The excess keys the
      -- previous run's frontier found past this run's start stay with this run.
      IF done.id IS NOT NULL THEN
        INSERT INTO @extschema@.subagent_context_reconciliation_keys (reconciliation_id, kind, task_session_id, tool_call_id)
        SELECT run.id, k.kind, k.task_session_id, k.tool_call_id
          FROM @extschema@.subagent_context_reconciliation_keys AS k
          JOIN @extschema@.task_session_subagents AS r
            ON r.task_session_id = k.task_session_id AND r.tool_call_id = k.tool_call_id
         WHERE k.reconciliation_id = done.id AND k.kind = 'excess' AND r.observed_at >= run.started_at
        ON CONFLICT DO NOTHING;
      END IF;
      DELETE FROM @extschema@.subagent_context_reconciliations AS r WHERE r.id <> run.id;
      DELETE FROM @extschema@.subagent_context_missing_keys AS k
       WHERE k.capture_since <> since OR k.confirmed_at < run.started_at;
    END IF;
    status := CASE WHEN completed THEN 'completed' ELSE 'stepped' END;
  END IF;

  reconciliation_id := run.id;
  started_at := run.started_at;
  compared_through := run.compared_through;
  messages_compared := run.messages_compared;
  SELECT count(*) INTO missing FROM @extschema@.subagent_context_missing_keys AS k WHERE k.capture_since = since;
  SELECT count(*) INTO excess FROM @extschema@.subagent_context_reconciliation_keys AS k
   WHERE k.reconciliation_id = run.id AND k.kind = 'excess';
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
  -- A procedure that commits may carry no SET clause: every name qualified (docs/decisions.md#the-trust-boundary).
  called timestamp := pg_catalog.timezone('UTC', pg_catalog.clock_timestamp());
BEGIN
  LOOP
    SELECT * INTO step FROM @extschema@.subagent_context_reconcile(called);
    COMMIT;
    EXIT WHEN step.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'current', 'busy', 'read_only', 'not_activated']);
  END LOOP;
END
$$;
