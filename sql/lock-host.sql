-- The first statement of every transaction of ours that changes kandev's tables (install, upgrade,
-- uninstall): it takes the locks the DDL after it needs, so that no statement after it queues kandev's
-- writers (docs/reliability.md#locks). Internal; rendered by lockHost() in loader.js, which puts the
-- locks to take, as ARRAY[[table, mode], ...], in place of the placeholder below.
--
-- A lock request waits in PostgreSQL's queue, and every writer that comes after it waits behind it; so
-- each try waits at most subagent_context.lock_timeout (default 1s), then gives the lock queue back,
-- sleeps (0.5 s more after each try) and tries again. After subagent_context.lock_tries tries (default
-- 5) it stops with one sentence naming the sessions that hold the table, and the transaction rolls
-- back: nothing was changed. A lock taken inside the block below stays with the transaction.
DO $lock_host$
DECLARE
  locks constant text[][] := @host_locks@;
  wait text := coalesce(nullif(current_setting('subagent_context.lock_timeout', true), ''), '1s');
  tries int := coalesce(nullif(current_setting('subagent_context.lock_tries', true), '')::int, 5);
  try int := 0;
  l text[];
  blocked text;
  holders text;
  before text := current_setting('lock_timeout');
BEGIN
  LOOP
    try := try + 1;
    BEGIN
      PERFORM set_config('lock_timeout', wait, true);
      FOREACH l SLICE 1 IN ARRAY locks LOOP
        blocked := l[1];
        IF to_regclass(format('%s.%I', '@extschema@', l[1])) IS NOT NULL THEN
          EXECUTE format('LOCK TABLE %s.%I IN %s MODE', '@extschema@', l[1], l[2]);
        END IF;
      END LOOP;
      PERFORM set_config('lock_timeout', before, true);
      RETURN;
    EXCEPTION WHEN lock_not_available THEN
      IF try >= tries THEN
        -- Oldest transaction first: once this try gave the queue back, writers that waited behind it
        -- hold the table for an instant too, and the one to name is the long one. A session of another
        -- role shows only its pid and role to a role without pg_read_all_stats: say that, and how to see more.
        SELECT string_agg(CASE WHEN a.query = '<insufficient privilege>'
                 THEN format('pid %s (role %s; what it runs is hidden from role %s: a superuser sees it, or GRANT pg_read_all_stats TO %s)',
                             a.pid, coalesce(a.usename::text, '?'), current_user, quote_ident(current_user))
                 ELSE format('pid %s (%s for %s, %s: %s)', a.pid, coalesce(a.usename::text, '?'),
                 coalesce(to_char(date_trunc('second', clock_timestamp() - a.xact_start), 'HH24:MI:SS'), '?'),
                 coalesce(a.state, '?'), left(regexp_replace(coalesce(a.query, ''), '\s+', ' ', 'g'), 60)) END, '; '
                 ORDER BY a.xact_start NULLS LAST, a.pid)
          INTO holders
          FROM pg_stat_activity AS a
         WHERE a.pid <> pg_backend_pid()
           AND a.pid IN (SELECT k.pid FROM pg_locks AS k
                          WHERE k.locktype = 'relation' AND k.granted
                            AND k.relation = to_regclass(format('%s.%I', '@extschema@', blocked)));
        RAISE EXCEPTION 'subagent-context: %.% is held by a long transaction (%), so this change did not take its lock within % in % tries; nothing was changed and kandev''s writers were never held more than %; end or wait out that transaction (SELECT pg_terminate_backend(<pid>) if it is stuck), then run this again',
          '@extschema@', blocked, coalesce(holders, 'a session that has since ended'), wait, tries, wait
          USING ERRCODE = 'lock_not_available';
      END IF;
    END;
    PERFORM pg_sleep(0.5 * try);
  END LOOP;
END
$lock_host$;
