-- Subagents per session: how many sessions launched exactly N subagents in the window (0 included, for
-- sessions that started in the window), so the spread is visible next to the per-card averages. Like
-- sessions-and-cards.sql, it reads the window's subagents and the sessions started in it, not every session.
WITH launched AS (
  SELECT task_session_id AS id, count(*) AS subagents
    FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')
   GROUP BY task_session_id),
per_session AS (
  SELECT launched.subagents
    FROM launched JOIN @extschema@.task_sessions AS s ON s.id = launched.id
  UNION ALL
  SELECT 0
    FROM @extschema@.task_sessions AS s
   WHERE s.started_at >= coalesce($1::timestamp, '-infinity') AND s.started_at < coalesce($2::timestamp, 'infinity')
     AND NOT EXISTS (SELECT 1 FROM launched WHERE launched.id = s.id))
SELECT subagents, count(*) AS sessions
  FROM per_session
 GROUP BY subagents
 ORDER BY subagents;
