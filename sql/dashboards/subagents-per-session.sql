-- Subagents per session: how many sessions launched exactly N subagents (0 included), so the spread is
-- visible next to the per-card averages.
SELECT subagents, count(*) AS sessions
  FROM (SELECT s.id, count(r.id) AS subagents
          FROM @extschema@.task_sessions AS s
          LEFT JOIN @extschema@.task_session_subagents AS r ON r.task_session_id = s.id
         GROUP BY s.id) AS per_session
 GROUP BY subagents
 ORDER BY subagents;
