-- The first statement of every transaction a migration runs (internal; rendered by migrations/lib/steps.js).
-- node-pg-migrate keeps two runs apart with an advisory lock on its session, and sets --schema as the
-- session's search_path; behind a transaction pooler the session is not the client's: it serves other
-- clients between transactions and may be another one for the next (docs/install.md#behind-a-connection-pooler).
-- So each transaction of ours takes that same lock for itself, without waiting and only until it ends
-- (pg_try_advisory_xact_lock: a session holding it, running or left behind, keeps us out, and we keep
-- out node-pg-migrate's own runs), and `subagent-context up` also checks that no other run recorded or
-- removed a migration since it read the bookkeeping. Plain node-pg-migrate holds the lock on its own
-- session, so its transactions must be on that session, with the search_path it set. Whatever is amiss
-- stops the transaction here, before it changes anything, in one sentence.
--
-- What it checks comes in the transaction-local setting subagent_context.migration_guard (set just before
-- it by migrationGuard() in sql/loader.js), a JSON object: lock, node-pg-migrate's lock id; bookkeeping,
-- the bookkeeping table, and expected, how many migrations it must hold now (null, null for plain
-- node-pg-migrate); schema, the schema this migration was rendered for, when it was read from
-- node-pg-migrate's search_path (null otherwise); hold_index_builds, true before the activation's index
-- steps: it then also takes SHARE UPDATE EXCLUSIVE on task_session_messages for the rest of the
-- transaction, so no other run's CREATE INDEX CONCURRENTLY is under way (one in progress leaves an invalid
-- index, which the steps would otherwise take for an interrupted build's).
DO $guard$
DECLARE
  given constant jsonb := coalesce(nullif(current_setting('subagent_context.migration_guard', true), ''), '{}')::jsonb;
  lock_id constant bigint := (given ->> 'lock')::bigint;
  bookkeeping constant text := given ->> 'bookkeeping';
  expected constant bigint := (given ->> 'expected')::bigint;
  expected_schema constant text := given ->> 'schema';
  recorded bigint;
  holder record;
  before text := current_setting('lock_timeout');
  -- The session's schema, read by migrationGuard() before it pinned the search_path of this transaction.
  session_schema constant text := nullif(current_setting('subagent_context.session_schema', true), '');
BEGIN
  IF expected_schema IS NOT NULL AND session_schema IS DISTINCT FROM expected_schema THEN
    RAISE EXCEPTION 'subagent-context: this migration''s transaction does not see the search_path node-pg-migrate set for --schema (it sees %, not %), so it changed nothing: node-pg-migrate''s URL goes through a transaction pooler, where its session does not follow its transactions; give it a direct or session-pooled URL, or use `subagent-context up` (docs/install.md)',
      coalesce(session_schema, 'no schema'), expected_schema USING ERRCODE = 'lock_not_available';
  END IF;
  IF lock_id IS NULL THEN
    RAISE EXCEPTION 'subagent-context: subagent_context.migration_guard is not set; this file runs after migrationGuard() sets it';
  END IF;
  IF NOT pg_try_advisory_xact_lock(lock_id) THEN
    SELECT a.pid, a.state, to_char(date_trunc('second', clock_timestamp() - a.state_change), 'HH24:MI:SS') AS idle
      INTO holder
      FROM pg_locks AS k JOIN pg_stat_activity AS a ON a.pid = k.pid
     WHERE k.locktype = 'advisory' AND k.granted AND k.pid <> pg_backend_pid()
       AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND k.classid = (lock_id >> 32)::oid AND k.objid = (lock_id & 4294967295)::oid AND k.objsubid = 1
     ORDER BY a.xact_start NULLS FIRST LIMIT 1;
    IF bookkeeping IS NULL THEN
      RAISE EXCEPTION 'subagent-context: node-pg-migrate''s lock on this database is held by %, not by the session running this migration, so it changed nothing: either another run is installing (wait for it to finish, then run this again), or node-pg-migrate''s URL goes through a transaction pooler, where its session does not follow its transactions; give it a direct or session-pooled URL, or use `subagent-context up` (docs/install.md)',
        coalesce('pid ' || holder.pid, 'a session that has since ended') USING ERRCODE = 'lock_not_available';
    ELSIF holder.state = 'idle' THEN
      RAISE EXCEPTION 'subagent-context: another `subagent-context up` (or node-pg-migrate) is installing into this database right now, or pid % kept node-pg-migrate''s lock after one (idle for %; a transaction pooler''s server connection does after node-pg-migrate ran through it), so this one stopped, changing nothing more: wait for it to finish and run this again, or, if nothing is installing, end that session first (SELECT pg_terminate_backend(%))',
        holder.pid, holder.idle, holder.pid USING ERRCODE = 'lock_not_available';
    ELSE
      RAISE EXCEPTION 'subagent-context: another `subagent-context up` (or node-pg-migrate) is installing into this database right now (%), so this one stopped, changing nothing more: wait for it to finish, then run this again',
        coalesce('pid ' || holder.pid, 'a session that has since ended') USING ERRCODE = 'lock_not_available';
    END IF;
  END IF;
  IF expected IS NOT NULL THEN
    EXECUTE format('SELECT count(*) FROM %s', bookkeeping) INTO recorded;
    IF recorded <> expected THEN
      RAISE EXCEPTION 'subagent-context: another `subagent-context up` (or node-pg-migrate) installed or removed migrations in this schema while this one ran, so this one stopped, changing nothing more: run this again'
        USING ERRCODE = 'lock_not_available';
    END IF;
  END IF;
  IF coalesce((given ->> 'hold_index_builds')::boolean, false) THEN
    BEGIN
      PERFORM set_config('lock_timeout', '5s', true);
      LOCK TABLE @extschema@.task_session_messages IN SHARE UPDATE EXCLUSIVE MODE;
      PERFORM set_config('lock_timeout', before, true);
    EXCEPTION WHEN lock_not_available THEN
      RAISE EXCEPTION 'subagent-context: another session is building an index on or vacuuming %.task_session_messages (it held the table for 5 s), so this one changed nothing more: if it is another `subagent-context up`, wait for it to finish; then run this again',
        '@extschema@' USING ERRCODE = 'lock_not_available';
    END;
  END IF;
END
$guard$;
