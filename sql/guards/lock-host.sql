-- In every transaction of ours that changes kandev's tables (install, upgrade, uninstall), right before the
-- first statement that needs them (sql/manifest.txt): it takes the locks the DDL after it needs, so that no
-- statement after it queues kandev's writers, and kandev's writes wait only for what follows it (install and
-- upgrade create their tables and functions before it) (docs/reliability.md#locks). Internal. Which locks: the transaction-local setting
-- subagent_context.host_locks ('table:MODE,table:MODE', set by the loader); without it, install's.
--
-- A lock request waits in PostgreSQL's queue, and every writer that comes after it waits behind it; so
-- each try waits at most subagent_context.lock_timeout (default 1s), then gives the lock queue back,
-- sleeps (0.5 s more after each try) and tries again. After subagent_context.lock_tries tries (default
-- 5) it stops with one sentence naming the sessions that hold the table, and the transaction rolls
-- back: nothing was changed. A lock taken inside the block below stays with the transaction.
--
-- On Citus (task_session_messages distributed, docs/citus.md#locks-on-the-workers) the DDL after this runs
-- on every shard, on the workers, where a lock_timeout set on the coordinator does not reach, and a session
-- open on a worker (even one that only read a row of a shard) would hold it, and kandev's writes queued
-- behind it on the coordinator, for as long as it stays open. So there:
-- - a SET LOCAL lock_timeout, which Citus passes to the workers of this transaction when
--   citus.propagate_set_commands is 'local', bounds every wait of the rest of the transaction on a worker;
-- - each try, after the coordinator's lock, takes the same lock on every shard with a statement that
--   changes nothing (the trigger's ENABLE state set to what it is; DROP DEFAULT of a column that has none),
--   so the wait for a worker's session happens here, under the same timeout, back-off and retries, and the
--   sentence names the worker and the session there. A Citus that cannot pass the timeout on is refused
--   before the first lock.
DO $lock_host$
DECLARE
  locks constant text[] := string_to_array(coalesce(nullif(current_setting('subagent_context.host_locks', true), ''),
                             'task_sessions:SHARE ROW EXCLUSIVE,task_session_messages:SHARE ROW EXCLUSIVE'), ',');
  table_name text;
  wait text := coalesce(nullif(current_setting('subagent_context.lock_timeout', true), ''), '1s');
  tries_given text := pg_catalog.btrim(coalesce(pg_catalog.current_setting('subagent_context.lock_tries', true), ''));
  tries int;
  wait_ms int;
  try int := 0;
  l text;
  blocked text;
  holders text;
  queued_at timestamptz;  -- when the LOCK that timed out began to wait
  before text := current_setting('lock_timeout');
  messages regclass := to_regclass('@extschema@.task_session_messages');
  distributed boolean := false;  -- Citus: task_session_messages is a distributed table
  probe text;                    -- the statement that takes this try's lock on every shard, if any
  on_workers boolean := false;   -- the try that timed out was waiting on a worker
  -- On Citus: the sessions on the workers that hold a shard of task_session_messages ($1), or its copy there,
  -- in a mode that conflicts with $3, chosen as on the coordinator below against the moment $2; never this
  -- transaction's own connections. NULL: none. One look at every worker (run_command_on_workers, outside
  -- this transaction), which lists every session there holding a lock on the table or its shards, or a
  -- snapshot; indexes/message-index.sql takes the same look.
  worker_holders constant text := $holders$
    SELECT string_agg(pg_catalog.format('pid %s on worker %s:%s (%s for %s, %s: %s)', h.pid, h.nodename, h.nodeport,
             coalesce(h.usename, '?'),
             coalesce(pg_catalog.to_char(pg_catalog.date_trunc('second', pg_catalog.clock_timestamp() - h.xact_start), 'HH24:MI:SS'), '?'),
             coalesce(h.state, '?'), pg_catalog.left(pg_catalog.regexp_replace(coalesce(h.query, ''), '\s+', ' ', 'g'), 60)), '; '
             ORDER BY h.xact_start NULLS LAST, h.nodeport, h.pid) FILTER (WHERE h.evidence = h.best)
      FROM (SELECT s.*, e.evidence, min(e.evidence) OVER () AS best
              FROM (SELECT r.nodename, r.nodeport, (j->>'pid')::int AS pid, j->>'usename' AS usename,
                           (j->>'xact_start')::timestamptz AS xact_start, (j->>'query_start')::timestamptz AS query_start,
                           j->>'state' AS state, j->>'query' AS query
                      FROM pg_catalog.run_command_on_workers((
                             SELECT pg_catalog.format($look$
                               SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object('pid', a.pid, 'usename', a.usename,
                                        'xact_start', a.xact_start, 'query_start', a.query_start, 'state', a.state,
                                        'query', pg_catalog.left(a.query, 200), 'snapshot', a.backend_xmin IS NOT NULL,
                                        'modes', coalesce(m.modes, ARRAY[]::text[]))), '[]')::text
                                 FROM pg_catalog.pg_stat_activity AS a
                                 LEFT JOIN (SELECT l.pid, pg_catalog.array_agg(DISTINCT l.mode) AS modes
                                              FROM pg_catalog.pg_locks AS l JOIN pg_catalog.pg_class AS c ON c.oid = l.relation
                                             WHERE l.locktype = 'relation' AND l.granted
                                               AND l.database = (SELECT d.oid FROM pg_catalog.pg_database AS d
                                                                  WHERE d.datname = pg_catalog.current_database())
                                               AND c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = %L)
                                               AND (c.relname = %L OR c.relname ~ %L)
                                             GROUP BY l.pid) AS m ON m.pid = a.pid
                                WHERE a.datname = pg_catalog.current_database() AND a.backend_type = 'client backend'
                                  AND a.pid <> pg_catalog.pg_backend_pid() AND a.application_name IS DISTINCT FROM %L
                                  AND (m.pid IS NOT NULL OR a.backend_xmin IS NOT NULL)
                             $look$, n.nspname, c.relname, '^' || c.relname || '_[0-9]+$',
                                    'citus_internal gpid=' || pg_catalog.citus_backend_gpid())
                               FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
                              WHERE c.oid = $1)) AS r,
                           LATERAL pg_catalog.json_array_elements(CASE WHEN r.success THEN r.result::json ELSE '[]' END) AS j
                     WHERE EXISTS (SELECT 1 FROM pg_catalog.json_array_elements_text(j->'modes') AS m(mode)
                                    WHERE CASE m.mode WHEN 'AccessShareLock' THEN $3 = 'ACCESS EXCLUSIVE'
                                                      WHEN 'RowShareLock' THEN $3 IN ('EXCLUSIVE', 'ACCESS EXCLUSIVE')
                                                      ELSE true END)) AS s,
                   LATERAL (SELECT CASE WHEN s.xact_start < $2 AND s.query_start < $2 THEN 1
                                        WHEN s.xact_start < $2 THEN 2 ELSE 3 END AS evidence) AS e) AS h
  $holders$;
  waited_for interval;
BEGIN
  -- Both tunables bounded, a bad value refused in one sentence before the first lock (docs/reliability.md#locks):
  -- a lock_timeout of 0 would wait without end, the very thing each try exists to avoid.
  IF tries_given !~ '^([1-9][0-9]?|100)?$' THEN
    RAISE EXCEPTION 'subagent-context: subagent_context.lock_tries must be a whole number from 1 to 100, got "%"; nothing was changed',
      pg_catalog.left(tries_given, 40) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  tries := coalesce(nullif(tries_given, '')::int, 5);
  BEGIN
    PERFORM pg_catalog.set_config('lock_timeout', wait, true);
    wait_ms := (SELECT s.setting::int FROM pg_catalog.pg_settings AS s WHERE s.name = 'lock_timeout');
    PERFORM pg_catalog.set_config('lock_timeout', before, true);
  EXCEPTION WHEN invalid_parameter_value OR invalid_text_representation THEN
    wait_ms := NULL;
  END;
  IF wait_ms IS NULL OR wait_ms NOT BETWEEN 10 AND 60000 THEN
    RAISE EXCEPTION 'subagent-context: subagent_context.lock_timeout must be a duration from 10ms to 60s, got "%"; nothing was changed',
      pg_catalog.left(wait, 40) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF messages IS NOT NULL AND to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN  -- EXECUTE: only on Citus
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
       INTO distributed USING messages;
  END IF;
  IF distributed THEN
    IF pg_catalog.current_setting('citus.propagate_set_commands', true) IS NULL THEN
      RAISE EXCEPTION 'subagent-context: this Citus cannot bound a wait on its workers (it has no citus.propagate_set_commands), so this change took no lock and changed nothing; upgrade Citus (docs/citus.md#locks-on-the-workers)'
        USING ERRCODE = 'feature_not_supported';
    END IF;
    PERFORM pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
    EXECUTE pg_catalog.format('SET LOCAL lock_timeout = %L', wait);
    waited_for := pg_catalog.current_setting('lock_timeout')::interval;
  END IF;
  LOOP
    try := try + 1;
    on_workers := false;
    BEGIN
      PERFORM set_config('lock_timeout', wait, true);
      FOREACH l IN ARRAY locks LOOP
        table_name := split_part(l, ':', 1);
        blocked := table_name;
        IF split_part(l, ':', 2) NOT IN ('SHARE ROW EXCLUSIVE', 'ACCESS EXCLUSIVE') THEN
          RAISE EXCEPTION 'subagent-context: unknown lock mode in subagent_context.host_locks: %', l;
        END IF;
        IF to_regclass(format('%s.%I', '@extschema@', table_name)) IS NOT NULL THEN
          probe := NULL;
          IF distributed AND table_name = 'task_session_messages' THEN
            probe := CASE split_part(l, ':', 2)
              WHEN 'ACCESS EXCLUSIVE' THEN
                (SELECT pg_catalog.format('ALTER TABLE %s.%I ALTER COLUMN %I DROP DEFAULT', '@extschema@', table_name, a.attname)
                   FROM pg_catalog.pg_attribute AS a
                  WHERE a.attrelid = messages AND a.attnum > 0 AND NOT a.attisdropped AND NOT a.atthasdef AND a.attidentity = ''
                    AND a.attname <> 'task_session_id'
                  ORDER BY a.attnum LIMIT 1)
              ELSE  -- SHARE ROW EXCLUSIVE; before the first install there is no trigger, and nothing to take it with
                (SELECT pg_catalog.format('ALTER TABLE %s.%I %s TRIGGER subagent_context_capture', '@extschema@', table_name,
                          CASE t.tgenabled WHEN 'A' THEN 'ENABLE ALWAYS' WHEN 'R' THEN 'ENABLE REPLICA'
                                           WHEN 'D' THEN 'DISABLE' ELSE 'ENABLE' END)
                   FROM pg_catalog.pg_trigger AS t
                  WHERE t.tgrelid = messages AND t.tgname = 'subagent_context_capture')
            END;
            IF probe IS NULL THEN
              -- Nothing takes the lock on the shards before the trigger exists: before locking anything,
              -- wait, as long as a lock would, until no session on a worker holds a shard in a conflicting
              -- mode (the CREATE TRIGGER that follows waits at most the timeout set above for one that
              -- comes after).
              on_workers := true;
              queued_at := clock_timestamp();
              LOOP
                EXECUTE worker_holders INTO holders USING messages, queued_at, split_part(l, ':', 2);
                EXIT WHEN holders IS NULL;
                IF clock_timestamp() - queued_at >= waited_for THEN
                  RAISE EXCEPTION 'subagent-context: a shard is held on a worker' USING ERRCODE = 'lock_not_available';
                END IF;
                PERFORM pg_catalog.pg_sleep(0.1);
              END LOOP;
              on_workers := false;
            END IF;
          END IF;
          queued_at := clock_timestamp();
          EXECUTE format('LOCK TABLE %s.%I IN %s MODE', '@extschema@', table_name, split_part(l, ':', 2));
          IF probe IS NOT NULL THEN
            on_workers := true;
            queued_at := clock_timestamp();
            EXECUTE probe;
            on_workers := false;
          END IF;
        END IF;
      END LOOP;
      -- The coordinator's statements wait as they did; on Citus the workers keep the bound (set above).
      PERFORM set_config('lock_timeout', before, true);
      RETURN;
    EXCEPTION WHEN lock_not_available OR internal_error THEN
      -- Citus takes the coordinator's LOCK on the table's copy on every worker too, over the connection that
      -- carries its metadata; a lock timeout there comes back as this error (the try rolls back all the same).
      IF SQLSTATE = 'XX000' THEN
        IF NOT (distributed AND SQLERRM LIKE 'failure on connection marked as essential%') THEN
          RAISE;
        END IF;
        on_workers := true;
      END IF;
      IF try >= tries AND on_workers THEN
        -- The sessions on the workers that hold a shard of the table in a mode that conflicts, chosen as on
        -- the coordinator below, from Citus' views of every node (citus_locks, citus_stat_activity); not
        -- this transaction's own connections.
        EXECUTE worker_holders INTO holders USING messages, queued_at, split_part(l, ':', 2);
        RAISE EXCEPTION 'subagent-context: %.% is held on a Citus worker by a long transaction (%), so this change did not take its lock there within % in % tries; nothing was changed and kandev''s writers were never held more than %; end or wait out that transaction (on that worker: SELECT pg_terminate_backend(<pid>) if it is stuck), then run this again',
          '@extschema@', blocked, coalesce(holders, 'a session that has since ended'), wait, tries, wait
          USING ERRCODE = 'lock_not_available';
      ELSIF try >= tries THEN
        -- The sessions that held the table through this last try: in a transaction begun before the try
        -- started waiting (queued_at, read just before the LOCK; the timeout's moment less the wait would
        -- also count a writer that queued behind it within the timeout's slack), and with no statement
        -- begun since. Once the try gave its place in the queue back, the writers that queued behind it
        -- hold the table too, each for an instant, and are not named (nor a reader, whose lock conflicts
        -- only with ACCESS EXCLUSIVE). Should none qualify, the next best: transactions begun before the
        -- wait; else every holder. Oldest transaction first. A session of another role shows only its pid
        -- and role to a role without pg_read_all_stats: say that, and how to see more.
        SELECT string_agg(CASE WHEN h.query = '<insufficient privilege>'
                 THEN format('pid %s (role %s; what it runs is hidden from role %s: a superuser sees it, or GRANT pg_read_all_stats TO %s)',
                             h.pid, coalesce(h.usename::text, '?'), current_user, quote_ident(current_user))
                 ELSE format('pid %s (%s for %s, %s: %s)', h.pid, coalesce(h.usename::text, '?'),
                 coalesce(to_char(date_trunc('second', clock_timestamp() - h.xact_start), 'HH24:MI:SS'), '?'),
                 coalesce(h.state, '?'), left(regexp_replace(coalesce(h.query, ''), '\s+', ' ', 'g'), 60)) END, '; '
                 ORDER BY h.xact_start NULLS LAST, h.pid) FILTER (WHERE h.evidence = h.best)
          INTO holders
          FROM (SELECT a.*, e.evidence, min(e.evidence) OVER () AS best
                  FROM pg_stat_activity AS a,
                       LATERAL (SELECT queued_at AS since) AS w,
                       LATERAL (SELECT CASE WHEN a.xact_start < w.since AND a.query_start < w.since THEN 1
                                            WHEN a.xact_start < w.since THEN 2 ELSE 3 END AS evidence) AS e
                 WHERE a.pid <> pg_backend_pid()
                   AND a.pid IN (SELECT k.pid FROM pg_locks AS k
                                  WHERE k.locktype = 'relation' AND k.granted
                                    -- A relation's OID is this database's: a database cloned from the
                                    -- same template has tables of the same OIDs, and its sessions are
                                    -- in pg_locks too.
                                    AND k.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
                                    AND k.relation = to_regclass(format('%s.%I', '@extschema@', blocked))
                                    AND CASE k.mode WHEN 'AccessShareLock' THEN split_part(l, ':', 2) = 'ACCESS EXCLUSIVE'
                                                    WHEN 'RowShareLock' THEN split_part(l, ':', 2) IN ('EXCLUSIVE', 'ACCESS EXCLUSIVE')
                                                    ELSE true END)) AS h;
        RAISE EXCEPTION 'subagent-context: %.% is held by a long transaction (%), so this change did not take its lock within % in % tries; nothing was changed and kandev''s writers were never held more than %; end or wait out that transaction (SELECT pg_terminate_backend(<pid>) if it is stuck), then run this again',
          '@extschema@', blocked, coalesce(holders, 'a session that has since ended'), wait, tries, wait
          USING ERRCODE = 'lock_not_available';
      END IF;
    END;
    PERFORM pg_sleep(0.5 * try);
  END LOOP;
END
$lock_host$;
