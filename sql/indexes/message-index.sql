-- Health's index on task_session_messages (data layer): the one index this product adds to kandev's
-- own table. Internal. Built CONCURRENTLY, so message writers go on while it is built (a plain CREATE
-- INDEX would hold their writes for a whole scan of the table). CONCURRENTLY cannot run in a transaction
-- block, so the activation migration runs the statements of this file one at a time; they are separated
-- by `-- statement`.
--
-- Health, the reconciliation, the backfill and repair read the messages that may qualify, by created_at.
-- The predicate is the capture prefilter spelled out (MAY_QUALIFY in sql/loader.js), so the index depends on
-- no function: only messages that spell subagent_task get an entry. Its comment names the prefilter
-- (HEALTH_INDEX in sql/loader.js): an index built by an earlier release with another one is replaced
-- without blocking writers (a new one is built beside it, then the old one is dropped), and health stays
-- correct meanwhile (it reads the table where no index fits). Other messages pay the predicate per INSERT
-- and per non-HOT UPDATE; subagent frames one btree insert per new row version.

-- On Citus (docs/citus.md#locks-on-the-workers) the build runs on every shard, on the workers, outside any
-- transaction, where no timeout of ours reaches it; there it waits for every transaction that wrote to the
-- shard or holds a snapshot, for as long as it stays open. So, before building: while such a transaction
-- that began before the first look is still open on a worker, wait (0.5 s more after each try), and after
-- subagent_context.lock_tries tries refuse in one sentence naming it, before anything is built (a
-- transaction that begins after the first look is still waited for). The statements of this step wait
-- on the workers at most that timeout (a SET LOCAL that Citus passes on).
DO $citus_build$
DECLARE
  messages regclass := '@extschema@.task_session_messages'::regclass;
  current regclass := to_regclass('@extschema@.subagent_context_recent_messages_idx');
  distributed boolean := false;
  wait text := coalesce(nullif(pg_catalog.current_setting('subagent_context.lock_timeout', true), ''), '1s');
  tries int := coalesce(nullif(pg_catalog.current_setting('subagent_context.lock_tries', true), '')::int, 5);
  holders text;
  looked_from timestamptz;
BEGIN
  IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
    RETURN;  -- not Citus
  END IF;
  EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)' INTO distributed USING messages;
  IF NOT distributed THEN
    RETURN;
  END IF;
  PERFORM pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
  EXECUTE pg_catalog.format('SET LOCAL lock_timeout = %L', wait);
  IF current IS NOT NULL AND (SELECT i.indisvalid FROM pg_catalog.pg_index AS i WHERE i.indexrelid = current) THEN
    RETURN;  -- built already (a rebuild for another predicate is left to wait as it would)
  END IF;
  -- A transaction counts if it began before the first look, however young it was then: one that ends by
  -- itself is gone by a later look, one left open (idle with a snapshot, as a driver's transaction may be)
  -- would hold the build on its shards for as long as it stays open. (Counting only those older than the
  -- lock timeout let a reader opened just before a quick install through, and the build waited for it.)
  looked_from := pg_catalog.clock_timestamp();
  FOR try IN 1..tries LOOP
    -- One look at every worker (run_command_on_workers, outside this transaction), as guards/lock-host.sql takes it:
    -- every session there holding a lock on the table or its shards, or a snapshot.
    EXECUTE $holders$
      SELECT string_agg(pg_catalog.format('pid %s on worker %s:%s (%s for %s, %s: %s)', h.pid, h.nodename, h.nodeport,
               coalesce(h.usename, '?'),
               coalesce(pg_catalog.to_char(pg_catalog.date_trunc('second', pg_catalog.clock_timestamp() - h.xact_start), 'HH24:MI:SS'), '?'),
               coalesce(h.state, '?'), pg_catalog.left(pg_catalog.regexp_replace(coalesce(h.query, ''), '\s+', ' ', 'g'), 60)), '; '
               ORDER BY h.xact_start, h.nodeport, h.pid)
        FROM (SELECT r.nodename, r.nodeport, (j->>'pid')::int AS pid, j->>'usename' AS usename,
                     (j->>'xact_start')::timestamptz AS xact_start, j->>'state' AS state, j->>'query' AS query
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
                        WHERE c.oid = $2)) AS r,
                     LATERAL pg_catalog.json_array_elements(CASE WHEN r.success THEN r.result::json ELSE '[]' END) AS j
               WHERE (j->>'xact_start')::timestamptz < $1::timestamptz
                 AND ((j->>'snapshot')::boolean
                      OR EXISTS (SELECT 1 FROM pg_catalog.json_array_elements_text(j->'modes') AS m(mode)
                                  WHERE m.mode NOT IN ('AccessShareLock', 'RowShareLock', 'ShareLock')))) AS h
    $holders$ INTO holders USING looked_from, messages;
    EXIT WHEN holders IS NULL;
    IF try >= tries THEN
      RAISE EXCEPTION 'subagent-context: health''s index on %.task_session_messages is built CONCURRENTLY on every shard, which waits for every transaction on a worker that wrote to the table or holds a snapshot, and one has stayed open through % tries (%); nothing of the index was built and capture is not activated yet; end or wait out that transaction (on that worker: SELECT pg_terminate_backend(<pid>) if it is stuck), then run this again',
        '@extschema@', tries, holders USING ERRCODE = 'lock_not_available';
    END IF;
    PERFORM pg_catalog.pg_sleep(0.5 * try);
  END LOOP;
END
$citus_build$;

-- An interrupted build leaves an INVALID index that IF NOT EXISTS would keep; one built by an earlier
-- release with another predicate is set aside to be dropped once its replacement is built.
DO $prepare$
DECLARE
  current regclass := to_regclass('@extschema@.subagent_context_recent_messages_idx');
  old regclass := to_regclass('@extschema@.subagent_context_recent_messages_idx_old');
BEGIN
  IF old IS NOT NULL AND NOT (SELECT indisvalid FROM pg_index WHERE indexrelid = old) THEN
    DROP INDEX @extschema@.subagent_context_recent_messages_idx_old;
    old := NULL;
  END IF;
  IF current IS NULL THEN
    RETURN;
  ELSIF NOT (SELECT indisvalid FROM pg_index WHERE indexrelid = current) THEN
    DROP INDEX @extschema@.subagent_context_recent_messages_idx;
  ELSIF obj_description(current, 'pg_class') IS DISTINCT FROM 'subagent-context: prefilter b3f9b0791b74' THEN
    IF old IS NOT NULL THEN
      DROP INDEX @extschema@.subagent_context_recent_messages_idx_old;
    END IF;
    ALTER INDEX @extschema@.subagent_context_recent_messages_idx RENAME TO subagent_context_recent_messages_idx_old;
  END IF;
END
$prepare$;
-- statement
CREATE INDEX CONCURRENTLY IF NOT EXISTS subagent_context_recent_messages_idx
  ON @extschema@.task_session_messages (created_at) WHERE strpos(metadata, 'subagent_task') > 0;
-- statement
COMMENT ON INDEX @extschema@.subagent_context_recent_messages_idx IS 'subagent-context: prefilter b3f9b0791b74';
-- statement
DROP INDEX CONCURRENTLY IF EXISTS @extschema@.subagent_context_recent_messages_idx_old;
