-- Subagents per session: how many sessions launched exactly N subagents in the window (0 included, for
-- sessions that started in the window), so the spread is visible next to the per-card averages.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT subagents, count(*) AS sessions
  FROM (SELECT s.id, count(r.id) AS subagents
          FROM @extschema@.task_sessions AS s
          LEFT JOIN r ON r.task_session_id = s.id
         GROUP BY s.id
        HAVING count(r.id) > 0
            OR (s.started_at >= coalesce($1::timestamp, '-infinity') AND s.started_at < coalesce($2::timestamp, 'infinity'))) AS per_session
 GROUP BY subagents
 ORDER BY subagents;
