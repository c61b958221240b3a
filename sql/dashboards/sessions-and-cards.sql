-- Per card (task) and per session. "sessions per card" is what kandev's own tables show (1.0 almost
-- everywhere); every subagent is one more model context, so contexts per card = sessions + subagents.
-- A session counts when it started in the window or launched a subagent in it; cards are the tasks of
-- those sessions.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')),
per_session AS (
  SELECT s.id, s.task_id, count(r.id) AS subagents
    FROM @extschema@.task_sessions AS s
    LEFT JOIN r ON r.task_session_id = s.id
   GROUP BY s.id, s.task_id
  HAVING count(r.id) > 0
      OR (s.started_at >= coalesce($1::timestamp, '-infinity') AND s.started_at < coalesce($2::timestamp, 'infinity')))
SELECT count(DISTINCT task_id) AS cards,
       count(*) AS sessions,
       coalesce(sum(subagents), 0) AS subagents,
       count(*) FILTER (WHERE subagents > 0) AS sessions_with_subagents,
       round(count(*)::numeric / nullif(count(DISTINCT task_id), 0), 2) AS sessions_per_card,
       round(sum(subagents)::numeric / nullif(count(*), 0), 2) AS subagents_per_session,
       round(sum(subagents)::numeric / nullif(count(DISTINCT task_id), 0), 2) AS subagents_per_card,
       round((count(*) + sum(subagents))::numeric / nullif(count(DISTINCT task_id), 0), 2) AS contexts_per_card,
       coalesce(max(subagents), 0) AS most_subagents_in_one_session
  FROM per_session;
