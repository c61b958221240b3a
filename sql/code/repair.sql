-- Repair (docs/health.md#on-a-shortfall): the backfill's derivation applied to what health finds missing,
-- and the replay of failed captures. Public interface, installing role only: subagent_context_repair()
-- and subagent_context_replay_failures(), each one bounded batch per call (the CLI calls them until there
-- is nothing left). Each batch is one short transaction that holds a row it wrote for less than capture's
-- own 200 ms wait (subagent_context.repair_keys keys per store; a replay batch ends 50 ms after its first
-- merge); it waits at most 100 ms for a row that a transaction of kandev still holds
-- (subagent_context_store_history_waiting()), so no capture waits on it longer (docs/reliability.md#repair).

-- Refuses, in one sentence, what repair cannot do here.
CREATE FUNCTION @extschema@.subagent_context_repairable()
RETURNS timestamp
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_capture_since();
BEGIN
  IF since IS NULL THEN
    RAISE EXCEPTION 'subagent-context is not activated in schema %: there is no capture_since key', '@extschema@'
      USING HINT = 'Run `subagent-context up` (or `subagent-context backfill`) first.',
            ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  IF @extschema@.subagent_context_read_only() THEN
    RAISE EXCEPTION 'subagent-context repair writes rows, and this server or transaction is read-only'
      USING HINT = 'Run `subagent-context repair` against the primary; health, report and metrics work here.',
            ERRCODE = 'read_only_sql_transaction';
  END IF;
  RETURN since;
END
$$;

-- What was written since the last reconciliation and is missing, recorded: the comparison repair's first
-- batch starts with. Internal (subagent_context_repair(); the CLI runs it as the last step of its
-- comparison, before its first batch).
CREATE FUNCTION @extschema@.subagent_context_repair_compare()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_repairable();
BEGIN
  -- On one connection per worker, as the batches after it (subagent_context_repair()): the one Citus keeps.
  IF @extschema@.subagent_context_topology() = 'citus' THEN
    PERFORM set_config('citus.max_adaptive_executor_pool_size', '1', true);
  END IF;
  PERFORM count(*)
     FROM @extschema@.subagent_context_compare_recent(
            since, (SELECT r.compared_through FROM @extschema@.subagent_context_reconciled(since) AS r));
END
$$;

-- One batch of missing keys, newest message first, after the cursor (NULLs: from the newest; the first
-- call also records what was written since the last reconciliation and is missing, unless `compare_first`
-- is false: the caller ran subagent_context_repair_compare() just before): each key's row
-- derived from its newest qualifying message (the backfill's derivation, source 'backfill'), unless the
-- key has a row under any execution id.
-- Where the batch's keys are most of the candidate messages of the span of time they cover (a large gap),
-- the span is walked as the backfill walks a window, which stores the same rows, and the other missing keys
-- in it, at the backfill's rate; otherwise each key's messages are looked up at the instant a comparison
-- saw them. Keys whose row a transaction still holds are left for a later run (held). pending (first call
-- only, NULL after it: counting on every call would read the record once per batch): the recorded keys
-- after this batch; the cursor of the next batch; more: there may be one; put_back: keys of this batch went
-- back to the record, and the next call (`recheck`, its default) checks them first. A caller that passes
-- the batch before's put_back as `recheck` skips that check when there is nothing to check: the check
-- reads the record from the cursor up, past every key the run's earlier batches took out.
CREATE FUNCTION @extschema@.subagent_context_repair(
  before_created_at timestamp DEFAULT NULL, before_key text DEFAULT NULL, compare_first boolean DEFAULT true,
  recheck boolean DEFAULT true,
  OUT repaired bigint, OUT held bigint, OUT pending bigint, OUT next_created_at timestamp, OUT next_key text,
  OUT more boolean, OUT put_back boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off  -- every read is bounded by an index, whatever the statistics say (code/health.sql)
SET enable_bitmapscan = off  -- a bitmap ignores the density check's LIMIT and reads its whole span
SET jit = off
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_repairable();
  batch integer := @extschema@.subagent_context_repair_keys();
  keys record;
  walked record;
  dense boolean;
  got record;
  taken @extschema@.subagent_context_missing_keys[];  -- the batch's recorded keys, out of the record during its store
  unstored text[];
  extra text[];
BEGIN
  -- On Citus each statement of the batch runs on one connection to each worker, the one Citus keeps open
  -- between transactions, for the rest of this transaction. A batch's statements are small, and each new
  -- connection of a wider pool is a backend that starts cold: with it, a comparison with nothing to
  -- compare took 190 ms, without it 86 (a loaded machine). Rows are still inserted at the store's end.
  IF @extschema@.subagent_context_topology() = 'citus' THEN
    PERFORM set_config('citus.max_adaptive_executor_pool_size', '1', true);
  END IF;
  IF before_created_at IS NULL THEN
    IF compare_first THEN
      PERFORM @extschema@.subagent_context_repair_compare();
    END IF;
  ELSIF recheck THEN
    -- The keys the batch before this one did not store are checked first (the `batch` recorded keys
    -- nearest above the cursor: that batch's still recorded, the keys it stored having left with their
    -- rows), before this batch stores anything: checking costs a lookup of every key (on Citus a statement
    -- on every shard), and done after the store it would hold this batch's rows that much longer
    -- (docs/reliability.md#repair). Usually there is none, and no lookup.
    SELECT array_agg(w.task_session_id) AS sessions, array_agg(w.tool_call_id) AS calls, array_agg(w.message_created_at) AS instants
      INTO walked
      FROM (SELECT m.task_session_id, m.tool_call_id, m.message_created_at
              FROM @extschema@.subagent_context_missing_keys AS m
             WHERE m.capture_since = since AND m.message_created_at >= before_created_at
               AND (m.message_created_at, m.task_session_id || E'\x1f' || m.tool_call_id) >= (before_created_at, before_key)
             ORDER BY m.message_created_at, m.task_session_id || E'\x1f' || m.tool_call_id
             LIMIT batch) AS w;
    IF walked.sessions IS NOT NULL THEN
      SELECT * INTO got FROM @extschema@.subagent_context_resolved_keys(since, walked.sessions, walked.calls, walked.instants);
      PERFORM @extschema@.subagent_context_forget_missing(since, got.sessions, got.calls);
    END IF;
  END IF;
  SELECT array_agg(k.task_session_id ORDER BY k.message_created_at DESC, k.key DESC) AS sessions,
         array_agg(k.tool_call_id ORDER BY k.message_created_at DESC, k.key DESC) AS calls,
         array_agg(k.key ORDER BY k.message_created_at DESC, k.key DESC) AS keys,
         array_agg(k.message_created_at ORDER BY k.message_created_at DESC, k.key DESC) AS instants,
         count(*) AS n
    INTO keys
    FROM (SELECT m.task_session_id, m.tool_call_id, m.task_session_id || E'\x1f' || m.tool_call_id AS key, m.message_created_at
            FROM @extschema@.subagent_context_missing_keys AS m
           WHERE m.capture_since = since AND m.message_created_at <= coalesce(before_created_at, 'infinity')
             AND (m.message_created_at, m.task_session_id || E'\x1f' || m.tool_call_id)
                 < (coalesce(before_created_at, 'infinity'), coalesce(before_key, ''))
           -- By the key, as the cursor: ordered by tool_call_id (as before 0.5.0), a batch could end before
           -- keys of its last instant that the cursor then skipped, never stored.
           ORDER BY m.message_created_at DESC, 3 DESC
           LIMIT batch) AS k;
  more := keys.n = batch;
  IF keys.n = 0 THEN
    repaired := 0; held := 0; pending := CASE WHEN before_created_at IS NULL THEN 0 END; put_back := false;
    RETURN;
  END IF;
  -- Whether the span of the batch holds at most twice as many candidate messages as keys.
  EXECUTE $q$
    SELECT count(*) <= 2 * $3 FROM (SELECT 1 FROM @extschema@.task_session_messages AS m
                                     WHERE m.created_at >= $1 AND m.created_at < $2 AND @extschema@.subagent_context_may_qualify(m.metadata)
                                     LIMIT 2 * $3 + 1) AS w
  $q$ INTO dense USING keys.instants[keys.n], keys.instants[1] + interval '1 microsecond', keys.n;
  next_created_at := keys.instants[keys.n];
  next_key := keys.keys[keys.n];
  -- Counted before the store: from the store's first insert to the commit, a capture of a row it stored
  -- waits for this transaction, so nothing that can wait goes after it but what it must.
  IF before_created_at IS NULL THEN
    SELECT count(*) INTO pending FROM @extschema@.subagent_context_missing_keys AS m
     WHERE m.capture_since = since AND m.message_created_at <= next_created_at
       AND (m.message_created_at, m.task_session_id || E'\x1f' || m.tool_call_id) < (next_created_at, next_key);
  END IF;
  -- The batch's keys leave the record before the store, and the store returns the keys it stored, so no
  -- key is looked up again (on Citus that lookup was a statement on every shard). Before, not after: from
  -- the store's first insert to the commit a capture of a row it stored waits for this transaction, so the
  -- store is the last statement when every key was stored, as usual (docs/reliability.md#repair).
  -- Each key found through the unique index (= ANY of the digests): as a join, the planner may hash the
  -- whole record for every batch, and a batch then costs what is left of the record.
  WITH gone AS (
    DELETE FROM @extschema@.subagent_context_missing_keys AS k
     WHERE k.capture_since = since
       AND md5(k.task_session_id || E'\x1f' || k.tool_call_id) = ANY (ARRAY(SELECT md5(u.key) FROM unnest(keys.keys) AS u(key)))
       AND k.task_session_id || E'\x1f' || k.tool_call_id = ANY (keys.keys)
    RETURNING k AS taken_row)
  SELECT array_agg(g.taken_row) INTO taken FROM gone AS g;
  IF dense THEN
    SELECT * INTO got FROM @extschema@.subagent_context_store_history_waiting(
      keys.instants[keys.n], keys.instants[1] + interval '1 microsecond', NULL, NULL, NULL, 'skip');
  ELSE
    SELECT * INTO got FROM @extschema@.subagent_context_store_history_waiting(NULL, NULL, keys.sessions, keys.keys, keys.instants, 'skip');
  END IF;
  -- Computed in memory: a key of the batch it did not store (held, a row that exists, a message gone) goes
  -- back to the record; a key of the span it stored beyond the batch leaves it. Rare, and local writes.
  unstored := ARRAY(SELECT b.key FROM unnest(keys.keys) AS b(key) EXCEPT SELECT u.key FROM unnest(got.stored_keys) AS u(key));
  extra := ARRAY(SELECT u.key FROM unnest(got.stored_keys) AS u(key) EXCEPT SELECT b.key FROM unnest(keys.keys) AS b(key));
  IF cardinality(unstored) > 0 THEN
    INSERT INTO @extschema@.subagent_context_missing_keys
    SELECT t.* FROM unnest(taken) AS t WHERE t.task_session_id || E'\x1f' || t.tool_call_id = ANY (unstored)
    ON CONFLICT DO NOTHING;
  END IF;
  IF cardinality(extra) > 0 THEN
    DELETE FROM @extschema@.subagent_context_missing_keys AS k
     WHERE k.capture_since = since
       AND md5(k.task_session_id || E'\x1f' || k.tool_call_id) = ANY (ARRAY(SELECT md5(u.key) FROM unnest(extra) AS u(key)))
       AND k.task_session_id || E'\x1f' || k.tool_call_id = ANY (extra);
  END IF;
  repaired := got.stored;
  held := got.held;
  put_back := cardinality(unstored) > 0;
  -- A key of the batch not stored (back in the record): one more call checks it, as the next batch's first
  -- step.
  IF cardinality(unstored) > 0 OR got.held > 0 THEN
    more := true;
  END IF;
END
$$;

-- A point where a test holds the replay (subagent_context.pause_at names the point; the test holds an
-- advisory lock and releases it when it has done what it must do meanwhile): the orderings of a replay and
-- a live frame are forced, not slept into. Nothing happens unless that setting names the point. Waits by
-- trying, so the caller's lock_timeout does not end the pause. Internal.
CREATE FUNCTION @extschema@.subagent_context_pause(point text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  IF current_setting('subagent_context.pause_at', true) = point THEN
    WHILE NOT pg_try_advisory_xact_lock_shared(hashtext('subagent_context.pause'), hashtext(point)) LOOP
      PERFORM pg_sleep(0.005);
    END LOOP;
  END IF;
END
$$;

-- Replays one failed capture (docs/reliability.md#replay), in the caller's transaction:
-- - the message is read as it is now and, if it still qualifies, its row derived and merged through the
--   same subagent_context_merge_message() as capture, under the execution id capture had resolved;
-- - then the message is read again, with the row locked by that merge: a newer frame committed between the
--   read and the merge (its capture merged before ours, so ours put an older snapshot over it) is merged
--   again, so the row ends as the message is at the merge; a frame written after the merge waits for this
--   row and merges after it, as any two frames do;
-- - only then the failure is marked replayed. A message that is gone or no longer qualifies has nothing
--   to replay and is marked too. A key no btree entry can hold, or a write that fails on the data itself
--   (SQLSTATE class 22 or 54), is classified once (stays_because) and not retried by later runs; a row
--   still held (lock_timeout 100 ms) or any other fault leaves the failure for a later run.
-- The merged row is held until the caller commits: the CLI commits each replay on its own; a caller that
-- already holds rows passes holding, and a large document is then left for its next transaction (reading
-- it may take long). Nothing volatile is in a statement on a distributed table (Citus refuses it): the
-- clock is read into a variable first. outcome: 'replayed', 'classified', 'unreplayed', or 'later'.
CREATE FUNCTION @extschema@.subagent_context_replay_failure(failure_id bigint, failure_session text,
  holding boolean DEFAULT false, OUT outcome text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
AS $$
DECLARE
  f record;
  m record;
  again record;
  d record;
  doc jsonb;
  execution text;
  now_utc timestamp;
  merged text;
  reason text;
BEGIN
  PERFORM @extschema@.subagent_context_bound_worker_waits();
  SELECT x.id, x.task_session_id, x.message_id, x.agent_execution_id INTO f
    FROM @extschema@.subagent_context_failures AS x
   WHERE x.id = failure_id AND x.task_session_id IS NOT DISTINCT FROM failure_session
     AND x.replayed_at IS NULL AND x.stays_because IS NULL;
  IF NOT FOUND THEN
    outcome := 'replayed';  -- replayed meanwhile (another repair)
    RETURN;
  END IF;
  SELECT mm.task_session_id, mm.task_id, mm.turn_id, mm.metadata, mm.created_at, mm.updated_at INTO m
    FROM @extschema@.task_session_messages AS mm
   WHERE mm.task_session_id = f.task_session_id AND mm.id = f.message_id;
  IF holding AND octet_length(m.metadata) > 262144 THEN
    outcome := 'later';
    RETURN;
  END IF;
  BEGIN
    FOR attempt IN 1..3 LOOP
      doc := CASE WHEN @extschema@.subagent_context_may_qualify(m.metadata) THEN @extschema@.subagent_context_parse_metadata(m.metadata) END;
      execution := coalesce(f.agent_execution_id, @extschema@.subagent_context_execution_id(doc, NULL));
      now_utc := clock_timestamp() AT TIME ZONE 'UTC';
      SELECT * INTO d FROM @extschema@.subagent_context_derive_row(m.task_session_id, m.task_id, m.turn_id, doc,
                             coalesce(m.created_at, now_utc), coalesce(m.updated_at, now_utc), execution);
      IF NOT FOUND THEN
        merged := 'nothing to replay';  -- gone, no longer a subagent call, or no identity
        EXIT;
      END IF;
      -- The unique key's btree entry holds about 2.7 kB (the store leaves such keys out the same way).
      IF octet_length(d.task_session_id) + octet_length(d.agent_execution_id) + octet_length(d.tool_call_id) > 2600
         OR octet_length(d.task_id) > 2600 THEN
        reason := 'key_too_long';
        EXIT;
      END IF;
      PERFORM @extschema@.subagent_context_pause('replay: before merge');
      PERFORM @extschema@.subagent_context_merge_message(m.task_session_id, m.task_id, m.turn_id, doc,
                coalesce(m.created_at, now_utc), coalesce(m.updated_at, now_utc), execution, 'backfill');
      SELECT mm.task_session_id, mm.task_id, mm.turn_id, mm.metadata, mm.created_at, mm.updated_at INTO again
        FROM @extschema@.task_session_messages AS mm
       WHERE mm.task_session_id = f.task_session_id AND mm.id = f.message_id;
      IF (again.metadata, again.task_id, again.turn_id, again.created_at, again.updated_at)
         IS NOT DISTINCT FROM (m.metadata, m.task_id, m.turn_id, m.created_at, m.updated_at) THEN
        merged := 'merged';
        EXIT;
      END IF;
      m := again;  -- a newer frame was committed meanwhile: merge it too, under the lock we now hold
    END LOOP;
    PERFORM @extschema@.subagent_context_pause('replay: after merge');
  EXCEPTION WHEN OTHERS THEN
    merged := NULL;
    IF left(SQLSTATE, 2) IN ('22', '54') THEN
      reason := 'value_not_storable';
    END IF;
  END;
  now_utc := clock_timestamp() AT TIME ZONE 'UTC';
  IF merged IS NOT NULL THEN
    UPDATE @extschema@.subagent_context_failures AS x SET replayed_at = now_utc
     WHERE x.id = f.id AND x.task_session_id IS NOT DISTINCT FROM f.task_session_id;
    outcome := 'replayed';
  ELSIF reason IS NOT NULL THEN
    UPDATE @extschema@.subagent_context_failures AS x SET stays_because = reason
     WHERE x.id = f.id AND x.task_session_id IS NOT DISTINCT FROM f.task_session_id;
    outcome := 'classified';
  ELSE
    outcome := 'unreplayed';  -- held, or changed three times while we merged: the next run
  END IF;
END
$$;

-- The failed captures since activation still to replay (not replayed, not classified), oldest first,
-- after the cursor (NULL: from the start), at most `count`: what the CLI replays one by one. Internal.
CREATE FUNCTION @extschema@.subagent_context_failures_to_replay(
  after_occurred_at timestamp, after_id bigint, count integer)
RETURNS TABLE (id bigint, task_session_id text, occurred_at timestamp)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_repairable();
BEGIN
  RETURN QUERY
    SELECT x.id, x.task_session_id, x.occurred_at::timestamp
      FROM @extschema@.subagent_context_failures AS x
     WHERE x.occurred_at >= since AND x.replayed_at IS NULL AND x.stays_because IS NULL
       AND (x.occurred_at, x.id) > (coalesce(after_occurred_at, '-infinity'), coalesce(after_id, -1))
     ORDER BY x.occurred_at, x.id
     LIMIT count;
END
$$;

-- One batch of failed captures to replay (subagent_context_failures_to_replay()), each through
-- subagent_context_replay_failure(), in the caller's one transaction, for a caller of SQL: a row it merged
-- is held until that commits, so the batch ends 50 ms after its first merge. Returns the cursor of the next
-- batch; more: there may be one. (`repair` replays each failure in a transaction of its own.)
CREATE FUNCTION @extschema@.subagent_context_replay_failures(
  after_occurred_at timestamp DEFAULT NULL, after_id bigint DEFAULT NULL,
  OUT replayed bigint, OUT unreplayed bigint, OUT next_occurred_at timestamp, OUT next_id bigint, OUT more boolean,
  OUT classified bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  batch integer := least(@extschema@.subagent_context_batch_messages(), 200);
  f record;
  outcome text;
  holding_since timestamp;
  n integer := 0;
BEGIN
  replayed := 0; unreplayed := 0; classified := 0; more := false;
  FOR f IN SELECT * FROM @extschema@.subagent_context_failures_to_replay(after_occurred_at, after_id, batch) LOOP
    IF holding_since IS NOT NULL AND clock_timestamp() - holding_since > interval '50 milliseconds' THEN
      more := true;
      RETURN;
    END IF;
    outcome := @extschema@.subagent_context_replay_failure(f.id, f.task_session_id, holding_since IS NOT NULL);
    IF outcome = 'later' THEN
      more := true;
      RETURN;
    END IF;
    n := n + 1;
    next_occurred_at := f.occurred_at;
    next_id := f.id;
    holding_since := coalesce(holding_since, clock_timestamp());
    CASE outcome
      WHEN 'replayed' THEN replayed := replayed + 1;
      WHEN 'classified' THEN classified := classified + 1;
      ELSE unreplayed := unreplayed + 1;
    END CASE;
  END LOOP;
  more := n = batch;
END
$$;

-- What stays after a repair, and why, for its report (docs/reliability.md#failure-log): the failures since activation
-- that are not replayed, split into the ones still to replay (stale: their rows may differ from their
-- messages) and the classified ones, by reason; and the recorded missing keys that repair cannot store:
-- a key too long for the unique key, and a key whose (session, tool call) already has a row observed before
-- activation (a tool_call_id reused after activation: repair never touches an existing row).
CREATE FUNCTION @extschema@.subagent_context_repair_leftovers(
  OUT stale_failures bigint, OUT key_too_long bigint, OUT value_not_storable bigint,
  OUT missing_key_too_long bigint, OUT missing_reused_tool_call_id bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_capture_since();
BEGIN
  SELECT count(*) FILTER (WHERE f.stays_because IS NULL),
         count(*) FILTER (WHERE f.stays_because = 'key_too_long'),
         count(*) FILTER (WHERE f.stays_because = 'value_not_storable')
    INTO stale_failures, key_too_long, value_not_storable
    FROM @extschema@.subagent_context_failures AS f WHERE f.occurred_at >= since AND f.replayed_at IS NULL;
  -- Each part an intermediate result (MATERIALIZED): Citus joins no local table (the record) with a
  -- distributed one directly.
  WITH k AS MATERIALIZED (SELECT m.task_session_id AS s, m.tool_call_id AS c
                            FROM @extschema@.subagent_context_missing_keys AS m WHERE m.capture_since = since),
       too_long AS MATERIALIZED (SELECT DISTINCT f.task_session_id AS s, f.tool_call_id AS c
                                   FROM @extschema@.subagent_context_failures AS f
                                  WHERE f.stays_because = 'key_too_long' AND f.replayed_at IS NULL),
       older AS MATERIALIZED (SELECT DISTINCT r.task_session_id AS s, r.tool_call_id AS c
                                FROM k JOIN @extschema@.task_session_subagents AS r ON r.task_session_id = k.s AND r.tool_call_id = k.c
                               WHERE r.observed_at < since)
  SELECT count(*) FILTER (WHERE octet_length(k.s) + octet_length(k.c) > 2590 OR t.s IS NOT NULL),
         count(*) FILTER (WHERE octet_length(k.s) + octet_length(k.c) <= 2590 AND t.s IS NULL AND o.s IS NOT NULL)
    INTO missing_key_too_long, missing_reused_tool_call_id
    FROM k LEFT JOIN too_long AS t ON t.s = k.s AND t.c = k.c LEFT JOIN older AS o ON o.s = k.s AND o.c = k.c;
END
$$;
