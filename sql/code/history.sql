-- The history store: derives rows from messages already written and stores those whose key has no row
-- yet, under any execution id (docs/decisions.md#history-never-duplicates). Internal. Shared by the
-- backfill (code/backfill.sql: windows of creation time) and repair (code/repair.sql: given keys), and
-- the same derivation as capture's (subagent_context_derive_row(), code/derive.sql).

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
