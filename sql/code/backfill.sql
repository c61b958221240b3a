-- Backfill: derive rows for history written before capture was installed, then publish the activation
-- keys (docs/health.md#activation-keys). Public interface: subagent_context_backfill(),
-- subagent_context_backfill_step() and the procedure subagent_context_backfill_run().
--
-- History is walked newest first through health's index on task_session_messages, in windows of creation
-- time holding subagent_context_batch_messages() candidate messages (messages created at one instant are
-- never split), one window per transaction: a live write waits at most for one batch's insert and commit,
-- never for the whole backfill. In each window every (session, tool call) is derived from its newest
-- message, and stored unless its key already has a row under any execution id (live capture, a newer
-- window, kandev's own writer: docs/decisions.md#history-never-duplicates). Where the walk stands is kept
-- in subagent_context_backfill_progress, so a backfill stopped part-way continues there; the keys are
-- written only after the last window.

-- The newest created_at of a qualifying message with a complete identity: backfill_through.
CREATE FUNCTION @extschema@.subagent_context_newest_history()
RETURNS timestamp
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  newest timestamp;
BEGIN
  EXECUTE $q$
    SELECT m.created_at
      FROM @extschema@.task_session_messages AS m
     CROSS JOIN LATERAL (SELECT @extschema@.subagent_context_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
     WHERE @extschema@.subagent_context_may_qualify(m.metadata) AND m.created_at IS NOT NULL
       AND @extschema@.subagent_context_qualifies(p.doc) AND @extschema@.subagent_context_has_identity(m.task_session_id, m.task_id, p.doc)
     ORDER BY m.created_at DESC
     LIMIT 1
  $q$ INTO newest;
  RETURN newest;
END
$$;

-- One step of the guarded backfill, in the caller's transaction: nothing when both keys are present;
-- otherwise the next window of the walk, and, when that window was the last, the keys: capture_since
-- sampled from the clock after the last window, backfill_through the newest qualifying created_at of the
-- history, both with ON CONFLICT DO NOTHING (a present key is never rewritten).
-- status: 'already activated', 'in progress' (more windows to go: call again), 'activated', or 'failed'
-- (the window was rolled back, no key written, WARNING raised; a rerun continues where the walk stands).
-- batches, scanned and inserted count the whole backfill so far, across runs. One step at a time per
-- schema: a second caller waits for the first one's window, then takes the next.
CREATE FUNCTION @extschema@.subagent_context_backfill_step(
  OUT status text, OUT more boolean, OUT batches bigint, OUT scanned bigint, OUT inserted bigint,
  OUT capture_since text, OUT backfill_through text, OUT failure text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  step  text := 'check activation keys';
  batch integer := @extschema@.subagent_context_batch_messages();
  p     @extschema@.subagent_context_backfill_progress;
  below timestamp;
  lo    timestamp;
  n     bigint;
  got   record;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('subagent_context_backfill'), '@extschema@'::regnamespace::oid::int);
  capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
  backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
  more := false;
  batches := 0; scanned := 0; inserted := 0;
  IF capture_since IS NOT NULL AND backfill_through IS NOT NULL THEN
    status := 'already activated';
    RETURN;
  END IF;
  -- Before the block below, which turns an error into a 'failed' step: a refusal is the command's answer.
  -- In every step's transaction, since the last one writes the keys.
  PERFORM @extschema@.subagent_context_assert_meta_writable();

  BEGIN
    step := 'check capture trigger';
    IF @extschema@.subagent_context_trigger_state() IS NULL THEN
      RAISE EXCEPTION 'the capture trigger is not installed; activation would claim coverage that does not exist'
        USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    step := 'derive and store history';
    INSERT INTO @extschema@.subagent_context_backfill_progress DEFAULT VALUES ON CONFLICT DO NOTHING;
    SELECT * INTO p FROM @extschema@.subagent_context_backfill_progress;
    IF p.batches = 0 THEN
      p.newest := @extschema@.subagent_context_newest_history();
    END IF;
    -- Where the walk stands: everything created at or after walked_created_at is done (0.3.0 walked by
    -- (created_at, id): its instant is done again, which stores nothing twice).
    below := CASE WHEN p.walked_id IS NOT NULL THEN p.walked_created_at + interval '1 microsecond'
                  ELSE coalesce(p.walked_created_at, 'infinity') END;
    -- The window: down to the creation time of the batch-th candidate below, or to the start of history.
    EXECUTE $q$
      SELECT min(w.created_at), count(*)
        FROM (SELECT m.created_at FROM @extschema@.task_session_messages AS m
               WHERE @extschema@.subagent_context_may_qualify(m.metadata) AND m.created_at < $1
               ORDER BY m.created_at DESC LIMIT $2) AS w
    $q$ INTO lo, n USING below, batch;
    IF n < batch THEN
      lo := '-infinity';
    END IF;
    SELECT * INTO got FROM @extschema@.subagent_context_store_history_waiting(lo, below, NULL, NULL, NULL, 'fail');
    UPDATE @extschema@.subagent_context_backfill_progress AS g
       SET walked_created_at = lo, walked_id = NULL, newest = p.newest,
           batches = g.batches + 1, scanned = g.scanned + n, inserted = g.inserted + got.stored,
           updated_at = clock_timestamp() AT TIME ZONE 'UTC'
    RETURNING * INTO p;
    batches := p.batches; scanned := p.scanned; inserted := p.inserted;
    IF lo > '-infinity' THEN
      status := 'in progress';
      more := true;
      RETURN;
    END IF;

    step := 'write activation keys';
    INSERT INTO @extschema@.kandev_meta (key, value)
    VALUES ('subagent_context_capture_since',
            @extschema@.subagent_context_format_key(clock_timestamp() AT TIME ZONE 'UTC')),
           ('subagent_context_backfill_through',
            coalesce(@extschema@.subagent_context_format_key(p.newest), ''))
    ON CONFLICT (key) DO NOTHING;
    DELETE FROM @extschema@.subagent_context_backfill_progress;

    capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
    backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
    status := 'activated';
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'subagent-context: backfill failed at step "%" (SQLSTATE %): %; that batch was rolled back and no activation key was set; run `subagent-context backfill` again once the cause is fixed: it continues where it stopped',
      step, SQLSTATE, SQLERRM;
    status := 'failed';
    more := false;
    failure := format('step "%s" failed (SQLSTATE %s): %s', step, SQLSTATE, SQLERRM);
    SELECT g.batches, g.scanned, g.inserted INTO batches, scanned, inserted
      FROM @extschema@.subagent_context_backfill_progress AS g;
    batches := coalesce(batches, 0); scanned := coalesce(scanned, 0); inserted := coalesce(inserted, 0);
    capture_since := @extschema@.subagent_context_key('subagent_context_capture_since');
    backfill_through := @extschema@.subagent_context_key('subagent_context_backfill_through');
  END;
END
$$;

-- Every step, committing after each (plain node-pg-migrate's activation CALLs it outside a transaction
-- block). A procedure that commits may carry no SET clause, so it names everything by its schema and
-- uses no operator: the search_path of whoever calls it cannot change what it does.
CREATE PROCEDURE @extschema@.subagent_context_backfill_run()
LANGUAGE plpgsql
AS $$
DECLARE
  s record;
BEGIN
  LOOP
    SELECT * INTO s FROM @extschema@.subagent_context_backfill_step();
    EXIT WHEN NOT s.more;
    COMMIT;
  END LOOP;
END
$$;

-- The guarded backfill in the caller's one transaction: every step, then the outcome of the last.
CREATE FUNCTION @extschema@.subagent_context_backfill(
  OUT status text, OUT inserted bigint, OUT capture_since text, OUT backfill_through text,
  OUT failure text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s record;
BEGIN
  LOOP
    SELECT * INTO s FROM @extschema@.subagent_context_backfill_step();
    EXIT WHEN NOT s.more;
  END LOOP;
  status := s.status;
  inserted := CASE WHEN s.status = 'already activated' THEN 0 ELSE s.inserted END;
  capture_since := s.capture_since;
  backfill_through := s.backfill_through;
  failure := s.failure;
END
$$;
