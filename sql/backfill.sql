-- Backfill: derive rows for history written before capture was installed, then publish the activation
-- keys (docs/health.md#activation-keys). Public interface: subagent_context_backfill().
--
-- History is stored in bounded batches that each commit (docs/reliability.md#backfill): a live write of
-- a historical message waits at most for one batch, never for the whole backfill. The walk goes newest
-- first through health's index on task_session_messages (its predicate is the capture prefilter), so
-- the first message met for a (session, tool call) is the one its row is derived from; a key that
-- already has a row, under any execution id (live capture, an earlier batch, kandev's own writer), is
-- left alone. Where the walk stands is kept in subagent_context_backfill_progress (data layer), so a
-- backfill stopped part-way continues there. The keys are written only with the last batch.
--
-- Three ways to run it, one batch function under all of them:
--   subagent_context_backfill_step()   one batch, in the caller's transaction: the CLI calls it once per
--                                      statement (so once per transaction) and shows progress;
--   CALL subagent_context_backfill_run()  every batch, committing after each: plain node-pg-migrate;
--   subagent_context_backfill()        every batch in the caller's one transaction (for an operator's
--                                      own script; it holds what it wrote until that transaction ends).

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

-- Store derived history rows, for the backfill's batches and repair alike: only for (session, tool call)
-- keys that have no row yet, under any execution id (a stored row always wins, and history never
-- duplicates a subagent that live capture, kandev's own writer or an earlier installation recorded:
-- docs/decisions.md#history-never-duplicates), marked source 'backfill'. Returns how many it stored.
-- PL/pgSQL: its statement writes through a CTE, which no SQL function may hide in an expression on Citus.
CREATE FUNCTION @extschema@.subagent_store_history_rows(history_rows @extschema@.subagent_row[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE
-- Its one read of the table is a lookup of a few sessions: never a scan of the whole table, whatever the
-- statistics say while a backfill grows the table batch by batch from empty.
SET enable_seqscan = off
AS $$
DECLARE
  stored_rows bigint;
BEGIN
  WITH history AS MATERIALIZED (SELECT * FROM unnest(history_rows)),
       -- Keys of that history already recorded, under any execution id. A CTE rather than a correlated
       -- NOT EXISTS on the table: Citus plans no correlated subquery beside a CTE (docs/citus.md). The
       -- sessions as an array, so that the table is read through its index on task_session_id: as an
       -- IN (subquery) alone PostgreSQL 17 read the whole table once per batch, which made a backfill
       -- quadratic in the rows it had stored.
       recorded AS MATERIALIZED (
         SELECT r.task_session_id, r.tool_call_id FROM @extschema@.task_session_subagents AS r
          WHERE r.task_session_id = ANY (ARRAY(SELECT DISTINCT h.task_session_id FROM history AS h))
            AND (r.task_session_id, r.tool_call_id) IN (SELECT h.task_session_id, h.tool_call_id FROM history AS h)),
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
  SELECT count(*) INTO stored_rows FROM stored;
  RETURN stored_rows;
END
$$;

-- One batch of the walk: the next `batch_size` messages that pass the capture prefilter, older than
-- (before_created_at, before_id) (NULL: from the newest), newest first. Stores the rows of the keys it
-- meets that have no row yet; returns how many messages it visited, how many rows it stored, the newest
-- created_at among them that qualified with full identity, and the oldest message visited (where the
-- next batch starts). now_utc stands in for a missing updated_at (read by the caller: a volatile
-- argument would keep derive_subagent_row from being inlined). Internal; also the primitive a bounded
-- repair can reuse.
-- kandev's created_at is NOT NULL; a message without one is not visited.
CREATE FUNCTION @extschema@.subagent_store_history_batch(
  before_created_at timestamp, before_id text, batch_size integer, now_utc timestamp,
  OUT scanned bigint, OUT inserted bigint, OUT newest timestamp,
  OUT last_created_at timestamp, OUT last_id text)
LANGUAGE sql VOLATILE
AS $$
  WITH walked AS MATERIALIZED (
         SELECT m.id, m.task_session_id, m.task_id, m.turn_id, m.metadata, m.created_at, m.updated_at
           FROM @extschema@.task_session_messages AS m
          WHERE @may_qualify(m.metadata)@
            -- (created_at, id) < (before_created_at, before_id), from the newest when NULL. Spelled so
            -- that the index on created_at bounds the scan: this function's statements are planned with
            -- its arguments as parameters, and an `IS NULL OR` around the bound would leave the index
            -- unbounded, each batch reading it again from the newest entry (the backfill quadratic).
            AND m.created_at <= coalesce(before_created_at, 'infinity')
            AND (m.created_at < coalesce(before_created_at, 'infinity') OR before_created_at IS NULL
                 OR m.id < before_id)
          ORDER BY m.created_at DESC, m.id DESC
          LIMIT batch_size),
       history AS MATERIALIZED (
         SELECT DISTINCT ON (d.task_session_id, d.tool_call_id) d.*
           FROM walked AS m
          CROSS JOIN LATERAL (SELECT @extschema@.subagent_parse_metadata(m.metadata) AS doc OFFSET 0) AS p
          CROSS JOIN LATERAL @extschema@.derive_subagent_row(
                  m.task_session_id, m.task_id, m.turn_id, p.doc, m.created_at,
                  coalesce(m.updated_at, now_utc),
                  @extschema@.subagent_execution_id(p.doc, NULL)) AS d
          ORDER BY d.task_session_id, d.tool_call_id, m.created_at DESC, m.id DESC),
       -- Stored unless their key has a row already: by live capture, an earlier (newer) batch, kandev.
       stored AS (
         SELECT @extschema@.subagent_store_history_rows(array_agg(ROW(h.*)::@extschema@.subagent_row)) AS n
           FROM history AS h),
       oldest AS (
         SELECT w.created_at, w.id FROM walked AS w ORDER BY w.created_at, w.id LIMIT 1)
  SELECT (SELECT count(*) FROM walked), (SELECT coalesce(s.n, 0) FROM stored AS s), (SELECT max(h.observed_at) FROM history AS h),
         (SELECT o.created_at FROM oldest AS o), (SELECT o.id FROM oldest AS o)
$$;

-- One step of the guarded backfill, in the caller's transaction: nothing when both keys are present;
-- otherwise the next batch of the walk, and, when that batch was the last, the keys: capture_since
-- sampled from the clock after the last batch, backfill_through the newest qualifying created_at of the
-- whole walk, both with ON CONFLICT DO NOTHING (a present key is never rewritten).
-- status: 'already activated', 'in progress' (more batches to go: call again), 'activated', or 'failed'
-- (the batch was rolled back, no key written, WARNING raised; a rerun continues where the walk stands).
-- batches, scanned and inserted count the whole backfill so far, across runs.
-- One step at a time per schema: a second caller waits for the first one's batch, then takes the next.
-- 500 messages a batch: 100-160 ms on a 2-core machine running at a load of 12 (2 kB documents), so a
-- live write of a message the walk has reached waits well under a second (docs/reliability.md#backfill).
CREATE FUNCTION @extschema@.subagent_context_backfill_step(
  batch_size integer DEFAULT 500,
  OUT status text, OUT more boolean, OUT batches bigint, OUT scanned bigint, OUT inserted bigint,
  OUT capture_since text, OUT backfill_through text, OUT failure text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  step  text := 'check activation keys';
  p     @extschema@.subagent_context_backfill_progress;
  b     record;
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

  BEGIN
    step := 'check capture trigger';
    IF @extschema@.subagent_context_trigger_state() IS NULL THEN
      RAISE EXCEPTION 'the capture trigger is not installed; activation would claim coverage that does not exist'
        USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    step := 'derive and store history';
    INSERT INTO @extschema@.subagent_context_backfill_progress DEFAULT VALUES ON CONFLICT DO NOTHING;
    SELECT * INTO p FROM @extschema@.subagent_context_backfill_progress;
    SELECT * INTO b FROM @extschema@.subagent_store_history_batch(
      p.walked_created_at, p.walked_id, batch_size, clock_timestamp() AT TIME ZONE 'UTC');
    UPDATE @extschema@.subagent_context_backfill_progress AS g
       SET walked_created_at = coalesce(b.last_created_at, g.walked_created_at),
           walked_id = coalesce(b.last_id, g.walked_id),
           newest = greatest(g.newest, b.newest),
           batches = g.batches + 1, scanned = g.scanned + b.scanned, inserted = g.inserted + b.inserted,
           updated_at = clock_timestamp() AT TIME ZONE 'UTC'
    RETURNING * INTO p;
    batches := p.batches; scanned := p.scanned; inserted := p.inserted;
    IF b.scanned >= batch_size THEN
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
CREATE PROCEDURE @extschema@.subagent_context_backfill_run(batch_size integer DEFAULT 500)
LANGUAGE plpgsql
AS $$
DECLARE
  s record;
BEGIN
  LOOP
    SELECT * INTO s FROM @extschema@.subagent_context_backfill_step(batch_size);
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
