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

-- On Citus a row of task_session_subagents is locked on the worker that holds its shard, where the caller's
-- lock_timeout does not reach: a SET LOCAL, which Citus passes to the workers of the transaction when
-- citus.propagate_set_commands is 'local', bounds the wait there too, for the rest of the transaction (a
-- step of ours). Nothing elsewhere. Internal (subagent_context_store_history(), subagent_context_replay_failures()).
CREATE FUNCTION @extschema@.subagent_context_bound_worker_waits()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF @extschema@.subagent_context_topology() = 'citus' THEN
    PERFORM set_config('citus.propagate_set_commands', 'local', true);
    EXECUTE format('SET LOCAL lock_timeout = %L', current_setting('lock_timeout'));
  END IF;
END
$$;

-- Stores the rows derived from the messages that pass a filter, newest message per (session, tool call),
-- for keys that have no row yet under any execution id; returns how many it stored, and their keys
-- (session || E'\x1f' || tool call: repair forgets them without looking them up again). The filter: messages
-- created in [lo, hi), or, when `keys` is given, the messages of those keys created at the given instants
-- (where a comparison saw them: repair). One statement, whose rows are inserted at its end (after the sort
-- that picks the newest message), so a capture of one of them waits only for that insert and the commit;
-- Citus runs it on each shard where the data is. Internal; the primitive of the backfill and of repair.
CREATE FUNCTION @extschema@.subagent_context_store_history_keys(
  lo timestamp, hi timestamp, sessions text[], keys text[], instants timestamp[],
  OUT stored bigint, OUT stored_keys text[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'  -- see subagent_context_store_history_waiting()
SET enable_seqscan = off  -- every read is bounded by an index, whatever the statistics say (code/health.sql)
SET jit = off
AS $$
BEGIN
  PERFORM @extschema@.subagent_context_bound_worker_waits();
  -- EXECUTE: planned for these bounds (a window reads only its part of health's index). The keys come back
  -- from the insert itself (on Citus with the rows it inserted on each shard), at no further statement.
  EXECUTE $q$
    WITH inserted AS (
    INSERT INTO @extschema@.task_session_subagents (id, source,
      task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, parent_tool_call_id,
      subagent_type, description, agent_id, child_session_id, model, agent_status, tool_status,
      is_async, total_tokens, tool_use_count, duration_ms, observed_at, settled_at, updated_at)
    SELECT gen_random_uuid()::text, 'backfill', h.session, (h.d).task_id, (h.d).turn_id, (h.d).tool_call_id,
           (h.d).agent_execution_id, (h.d).parent_tool_call_id, (h.d).subagent_type, (h.d).description,
           (h.d).agent_id, (h.d).child_session_id, (h.d).model, (h.d).agent_status, (h.d).tool_status,
           (h.d).is_async, (h.d).total_tokens, (h.d).tool_use_count, (h.d).duration_ms, (h.d).observed_at,
           (h.d).settled_at, (h.d).updated_at
      -- The session as the message's own column: Citus then sees the rows land on the message's shard.
      FROM (SELECT DISTINCT ON (m.task_session_id, d.tool_call_id) m.task_session_id AS session, d
              FROM @extschema@.task_session_messages AS m
             CROSS JOIN LATERAL (SELECT @extschema@.subagent_context_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
             CROSS JOIN LATERAL @extschema@.subagent_context_derive_row(
                     m.task_session_id, m.task_id, m.turn_id, p.doc, m.created_at,
                     coalesce(m.updated_at, $6), @extschema@.subagent_context_execution_id(p.doc, NULL)) AS d
             WHERE @extschema@.subagent_context_may_qualify(m.metadata)
               AND CASE WHEN $4 IS NULL THEN m.created_at >= $1 AND m.created_at < $2
                        ELSE m.task_session_id = ANY ($3) AND m.created_at = ANY ($5) END
               AND ($4 IS NULL OR m.task_session_id || E'\x1f' || d.tool_call_id = ANY ($4))
             ORDER BY m.task_session_id, d.tool_call_id, m.created_at DESC, m.id DESC) AS h
      LEFT JOIN LATERAL (
             SELECT true AS found FROM @extschema@.task_session_subagents AS r
              WHERE r.task_session_id = h.session AND r.agent_execution_id = 'unknown' AND r.tool_call_id = (h.d).tool_call_id
             UNION ALL
             SELECT true FROM @extschema@.task_session_subagents AS r
              WHERE r.task_session_id = h.session AND r.tool_call_id = (h.d).tool_call_id AND r.agent_execution_id <> 'unknown'
             LIMIT 1) AS f ON true
     WHERE f.found IS NULL
       -- A key too long for a btree entry (~2.7 kB; only a hostile or broken writer makes one) would abort
       -- the whole statement: left out, it stays in health's shortfall (capture logs it as a failure, 54000).
       AND octet_length(h.session) + octet_length((h.d).agent_execution_id) + octet_length((h.d).tool_call_id) <= 2600
       AND octet_length((h.d).task_id) <= 2600
    ON CONFLICT (task_session_id, agent_execution_id, tool_call_id) DO NOTHING
    RETURNING task_session_id || E'\x1f' || tool_call_id AS key)
    SELECT count(*), array_agg(i.key) FROM inserted AS i
  $q$ INTO stored, stored_keys USING lo, hi, sessions, keys, instants, clock_timestamp() AT TIME ZONE 'UTC';
END
$$;

-- subagent_context_store_history_keys() for a caller that needs only how many it stored. Internal.
CREATE FUNCTION @extschema@.subagent_context_store_history(
  lo timestamp, hi timestamp, sessions text[], keys text[], instants timestamp[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN (SELECT s.stored FROM @extschema@.subagent_context_store_history_keys(lo, hi, sessions, keys, instants) AS s);
END
$$;

-- subagent_context_store_history() with bounded waits that never hold a row of ours across a wait: a key it must
-- store may be held by a transaction of kandev that is still open (a frame's row, not committed yet). Each
-- try waits at most 100 ms for such a row, then gives back everything it inserted, so a capture of one of
-- the rows it had inserted waits less than its own 200 ms; after a pause holding nothing (0.2 s, 0.4 s, ...)
-- the whole batch is tried again, five times. The keys still held then are found by trials that keep
-- nothing (subagent_context_store_history_held()) and either 'skip'ped, the others stored in one statement
-- (repair: a skipped key stays recorded for the next run), or the call fails naming the holders ('fail':
-- the backfill, whose step rolls back and resumes on the next run). Halving and keeping the halves that
-- went through, then pausing for a held key, would hold those halves' rows through every pause: a live
-- frame of one of them then failed (55P03) and the row kept the older snapshot. Returns rows stored, keys
-- left, and the keys stored (subagent_context_store_history_keys()).
CREATE FUNCTION @extschema@.subagent_context_store_history_waiting(
  lo timestamp, hi timestamp, sessions text[], keys text[], instants timestamp[], when_held text,
  OUT stored bigint, OUT held bigint, OUT stored_keys text[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  held_at integer[];
  free record;
BEGIN
  held := 0;
  FOR try IN 0..5 LOOP
    IF try > 0 THEN
      PERFORM pg_sleep(0.2 * try);
    END IF;
    BEGIN
      SELECT s.stored, s.stored_keys INTO stored, stored_keys
        FROM @extschema@.subagent_context_store_history_keys(lo, hi, sessions, keys, instants) AS s;
      RETURN;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;
  IF keys IS NULL THEN
    -- A window: its keys that have no row yet, each at the newest instant of its messages in the window.
    EXECUTE $q$
      SELECT array_agg(k.session), array_agg(k.key), array_agg(k.instant)
        FROM (SELECT m.task_session_id AS session, m.task_session_id || E'\x1f' || c.call AS key, max(m.created_at) AS instant
                FROM @extschema@.task_session_messages AS m
               CROSS JOIN LATERAL (SELECT @extschema@.subagent_context_text_field(@extschema@.subagent_context_parse_metadata(m.metadata), 'tool_call_id') AS call OFFSET 0) AS c
               WHERE m.created_at >= $1 AND m.created_at < $2 AND @extschema@.subagent_context_may_qualify(m.metadata) AND c.call IS NOT NULL
               GROUP BY m.task_session_id, c.call) AS k
    $q$ INTO sessions, keys, instants USING lo, hi;
    IF keys IS NULL THEN
      stored := 0;
      RETURN;
    END IF;
  END IF;
  held_at := @extschema@.subagent_context_store_history_held(sessions, keys, instants);
  IF cardinality(held_at) > 0 AND when_held = 'fail' THEN
    RAISE EXCEPTION 'subagent-context: a transaction that is still open holds the row of a subagent the backfill must store (session %, tool call %): %; end that transaction or wait for it, then run this again (the backfill resumes where it stopped)',
      left(sessions[held_at[1]], 100), left(split_part(keys[held_at[1]], E'\x1f', 2), 100), @extschema@.subagent_context_row_holders()
      USING ERRCODE = 'lock_not_available';
  END IF;
  SELECT array_agg(sessions[i] ORDER BY i) AS sessions, array_agg(keys[i] ORDER BY i) AS keys,
         array_agg(instants[i] ORDER BY i) AS instants
    INTO free
    FROM generate_subscripts(keys, 1) AS i WHERE i <> ALL (held_at);
  held := cardinality(held_at);
  stored := 0;
  IF free.keys IS NOT NULL THEN
    BEGIN
      SELECT s.stored, s.stored_keys INTO stored, stored_keys
        FROM @extschema@.subagent_context_store_history_keys(NULL, NULL, free.sessions, free.keys, free.instants) AS s;
    EXCEPTION WHEN lock_not_available THEN
      -- Another row was taken meanwhile: the backfill's step fails (and resumes on the next run); repair
      -- leaves the whole batch recorded for its next run.
      IF when_held = 'fail' THEN
        RAISE;
      END IF;
      held := cardinality(keys);
    END;
  END IF;
END
$$;

-- Which of the given keys (positions in the arrays) a transaction still holds the row of. Each trial
-- stores the keys and is then rolled back whatever it met, so it keeps no row; a trial that met a held row
-- is halved until the held keys stand alone. Internal (subagent_context_store_history_waiting()).
CREATE FUNCTION @extschema@.subagent_context_store_history_held(sessions text[], keys text[], instants timestamp[])
RETURNS integer[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  half integer := cardinality(keys) / 2;
BEGIN
  BEGIN
    PERFORM @extschema@.subagent_context_store_history(NULL, NULL, sessions, keys, instants);
    RAISE EXCEPTION 'a trial keeps nothing' USING ERRCODE = 'SC001';
  EXCEPTION
    WHEN SQLSTATE 'SC001' THEN
      RETURN '{}';
    WHEN lock_not_available THEN
      IF cardinality(keys) = 1 THEN
        RETURN '{1}';
      END IF;
  END;
  RETURN @extschema@.subagent_context_store_history_held(sessions[1:half], keys[1:half], instants[1:half])
      || ARRAY(SELECT p + half
                 FROM unnest(@extschema@.subagent_context_store_history_held(sessions[half + 1:], keys[half + 1:], instants[half + 1:])) AS p);
END
$$;

-- The sessions whose transactions, open for more than a second, may hold rows of task_session_subagents,
-- oldest first, for a sentence.
CREATE FUNCTION @extschema@.subagent_context_row_holders()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN coalesce((
    SELECT string_agg(format('pid %s (%s, transaction open for %s)', a.pid, coalesce(a.state, 'state unknown'),
                             coalesce(to_char(date_trunc('second', clock_timestamp() - a.xact_start), 'HH24:MI:SS'), '?')),
                      '; ' ORDER BY a.xact_start NULLS LAST, a.pid)
      FROM pg_stat_activity AS a
     WHERE a.pid <> pg_backend_pid() AND a.xact_start < clock_timestamp() - interval '1 second'
       AND a.pid IN (SELECT k.pid FROM pg_locks AS k
                      WHERE k.locktype = 'relation' AND k.granted AND k.mode = 'RowExclusiveLock'
                        -- This database's relation: another database's table can have the same OID.
                        AND k.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
                        AND k.relation = '@extschema@.task_session_subagents'::regclass)),
    'a session that has since ended');
END
$$;

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
