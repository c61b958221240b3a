-- Early in every transaction of ours that changes kandev's tables (install, upgrade, uninstall): it takes
-- the locks the DDL after it needs, so that no statement after it queues kandev's writers
-- (docs/reliability.md#locks). Internal. Which locks: the transaction-local setting
-- subagent_context.host_locks ('table:MODE,table:MODE', set by the loader); without it, install's.
--
-- A lock request waits in PostgreSQL's queue, and every writer that comes after it waits behind it; so
-- each try waits at most subagent_context.lock_timeout (default 1s), then gives the lock queue back,
-- sleeps (0.5 s more after each try) and tries again. After subagent_context.lock_tries tries (default
-- 5) it stops with one sentence naming the sessions that hold the table, and the transaction rolls
-- back: nothing was changed. A lock taken inside the block below stays with the transaction.
DO $lock_host$
DECLARE
  locks constant text[] := string_to_array(coalesce(nullif(current_setting('subagent_context.host_locks', true), ''),
                             'task_sessions:SHARE ROW EXCLUSIVE,task_session_messages:SHARE ROW EXCLUSIVE'), ',');
  table_name text;
  wait text := coalesce(nullif(current_setting('subagent_context.lock_timeout', true), ''), '1s');
  tries int := coalesce(nullif(current_setting('subagent_context.lock_tries', true), '')::int, 5);
  try int := 0;
  l text;
  blocked text;
  holders text;
  queued_at timestamptz;  -- when the LOCK that timed out began to wait
  before text := current_setting('lock_timeout');
BEGIN
  LOOP
    try := try + 1;
    BEGIN
      PERFORM set_config('lock_timeout', wait, true);
      FOREACH l IN ARRAY locks LOOP
        table_name := split_part(l, ':', 1);
        blocked := table_name;
        IF split_part(l, ':', 2) NOT IN ('SHARE ROW EXCLUSIVE', 'ACCESS EXCLUSIVE') THEN
          RAISE EXCEPTION 'subagent-context: unknown lock mode in subagent_context.host_locks: %', l;
        END IF;
        IF to_regclass(format('%s.%I', '@extschema@', table_name)) IS NOT NULL THEN
          queued_at := clock_timestamp();
          EXECUTE format('LOCK TABLE %s.%I IN %s MODE', '@extschema@', table_name, split_part(l, ':', 2));
        END IF;
      END LOOP;
      PERFORM set_config('lock_timeout', before, true);
      RETURN;
    EXCEPTION WHEN lock_not_available THEN
      IF try >= tries THEN
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
