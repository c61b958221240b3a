-- Repair (docs/health.md#on-a-shortfall): the backfill's derivation applied to what health finds missing,
-- and the replay of failed captures. Public interface, installing role only: subagent_context_repair()
-- and subagent_context_replay_failures(), each one bounded batch per call (the CLI calls them until there
-- is nothing left). Each batch is one short transaction; it waits at most 100 ms for a row that a
-- transaction of kandev still holds (subagent_store_history_waiting()), so no capture waits on it longer.

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

-- One batch of missing keys, newest message first, after the cursor (NULLs: from the newest; the first
-- call also records what was written since the last reconciliation and is missing): each key's row
-- derived from its newest qualifying message (the backfill's derivation, source 'backfill'), unless the
-- key has a row under any execution id.
-- Where the batch's keys are most of the candidate messages of the span of time they cover (a large gap),
-- the span is walked as the backfill walks a window, which stores the same rows, and the other missing keys
-- in it, at the backfill's rate; otherwise each key's messages are looked up at the instant a comparison
-- saw them. Keys whose row a transaction still holds are left for a later run (held). pending (first call
-- only, NULL after it: counting on every call would read the record once per batch): the recorded keys
-- after this batch; the cursor of the next batch; more: there may be one.
CREATE FUNCTION @extschema@.subagent_context_repair(
  before_created_at timestamp DEFAULT NULL, before_key text DEFAULT NULL,
  OUT repaired bigint, OUT held bigint, OUT pending bigint, OUT next_created_at timestamp, OUT next_key text,
  OUT more boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off  -- every read is bounded by an index, whatever the statistics say (health.sql)
SET enable_bitmapscan = off  -- a bitmap ignores the density check's LIMIT and reads its whole span
SET jit = off
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_repairable();
  batch integer := @extschema@.subagent_context_batch_messages();
  keys record;
  dense boolean;
  got record;
BEGIN
  IF before_created_at IS NULL THEN
    PERFORM count(*)
       FROM @extschema@.subagent_context_compare_recent(
              since, (SELECT r.compared_through FROM @extschema@.subagent_context_reconciled(since) AS r));
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
    repaired := 0; held := 0; pending := CASE WHEN before_created_at IS NULL THEN 0 END;
    RETURN;
  END IF;
  -- Whether the span of the batch holds at most twice as many candidate messages as keys.
  EXECUTE $q$
    SELECT count(*) <= 2 * $3 FROM (SELECT 1 FROM @extschema@.task_session_messages AS m
                                     WHERE m.created_at >= $1 AND m.created_at < $2 AND @extschema@.subagent_may_qualify(m.metadata)
                                     LIMIT 2 * $3 + 1) AS w
  $q$ INTO dense USING keys.instants[keys.n], keys.instants[1] + interval '1 microsecond', keys.n;
  IF dense THEN
    SELECT * INTO got FROM @extschema@.subagent_store_history_waiting(
      keys.instants[keys.n], keys.instants[1] + interval '1 microsecond', NULL, NULL, NULL, 'skip');
  ELSE
    SELECT * INTO got FROM @extschema@.subagent_store_history_waiting(NULL, NULL, keys.sessions, keys.keys, keys.instants, 'skip');
  END IF;
  repaired := got.stored;
  held := got.held;
  -- The batch's keys that have their row now leave the record (health would drop them on its next call).
  SELECT * INTO got FROM @extschema@.subagent_context_resolved_keys(since, keys.sessions, keys.calls, keys.instants);
  PERFORM @extschema@.subagent_context_forget_missing(since, got.sessions, got.calls);
  next_created_at := keys.instants[keys.n];
  next_key := keys.keys[keys.n];
  IF before_created_at IS NULL THEN
    SELECT count(*) INTO pending FROM @extschema@.subagent_context_missing_keys AS m
     WHERE m.capture_since = since AND m.message_created_at <= next_created_at
       AND (m.message_created_at, m.task_session_id || E'\x1f' || m.tool_call_id) < (next_created_at, next_key);
  END IF;
END
$$;

-- One batch of failed captures since activation that have not been replayed, oldest first, after the
-- cursor (NULL: from the start): each message's row re-derived from the message as it is now and merged
-- into its row under the merge rules, through the same subagent_merge_message() as capture, under the
-- execution id capture had resolved; then marked replayed. A message that is gone or no longer qualifies
-- has nothing to replay and is marked too; one whose row a transaction still holds, or whose write fails
-- again, is left for a later run (unreplayed). Returns the cursor of the next batch; more: there may be one.
CREATE FUNCTION @extschema@.subagent_context_replay_failures(
  after_occurred_at timestamp DEFAULT NULL, after_id bigint DEFAULT NULL,
  OUT replayed bigint, OUT unreplayed bigint, OUT next_occurred_at timestamp, OUT next_id bigint, OUT more boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
AS $$
DECLARE
  since timestamp := @extschema@.subagent_context_repairable();
  batch integer := @extschema@.subagent_context_batch_messages();
  f record;
  m record;
  doc jsonb;
  n integer := 0;
BEGIN
  PERFORM @extschema@.subagent_context_bound_worker_waits();
  replayed := 0; unreplayed := 0;
  FOR f IN
    SELECT x.id, x.occurred_at, x.task_session_id, x.message_id, x.agent_execution_id
      FROM @extschema@.subagent_context_failures AS x
     WHERE x.occurred_at >= since AND x.replayed_at IS NULL
       AND (x.occurred_at, x.id) > (coalesce(after_occurred_at, '-infinity'), coalesce(after_id, -1))
     ORDER BY x.occurred_at, x.id
     LIMIT batch
  LOOP
    n := n + 1;
    next_occurred_at := f.occurred_at;
    next_id := f.id;
    BEGIN
      SELECT mm.task_session_id, mm.task_id, mm.turn_id, mm.metadata, mm.created_at, mm.updated_at INTO m
        FROM @extschema@.task_session_messages AS mm
       WHERE mm.task_session_id = f.task_session_id AND mm.id = f.message_id;
      doc := CASE WHEN @extschema@.subagent_may_qualify(m.metadata) THEN @extschema@.subagent_parse_metadata(m.metadata) END;
      IF @extschema@.subagent_qualifies(doc) THEN
        PERFORM @extschema@.subagent_merge_message(m.task_session_id, m.task_id, m.turn_id, doc,
                  coalesce(m.created_at, clock_timestamp() AT TIME ZONE 'UTC'),
                  coalesce(m.updated_at, clock_timestamp() AT TIME ZONE 'UTC'),
                  coalesce(f.agent_execution_id, @extschema@.subagent_execution_id(doc, NULL)), 'backfill');
      END IF;
      UPDATE @extschema@.subagent_context_failures AS x SET replayed_at = clock_timestamp() AT TIME ZONE 'UTC'
       WHERE x.id = f.id AND (f.task_session_id IS NULL OR x.task_session_id = f.task_session_id);
      replayed := replayed + 1;
    EXCEPTION WHEN OTHERS THEN
      unreplayed := unreplayed + 1;
    END;
  END LOOP;
  more := n = batch;
END
$$;
