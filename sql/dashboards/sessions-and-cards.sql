-- Per card (task) and per session. "sessions per card" is what kandev's own tables show (1.0 almost
-- everywhere); every subagent is one more model context, so contexts per card = sessions + subagents.
-- A session counts when it launched a subagent in the window or started in it; cards are the tasks of
-- those sessions. The sessions are found from the window's subagents (each looked up by its key) and
-- from task_sessions.started_at, never by grouping every session of the history.
WITH r AS (
  SELECT task_session_id FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')),
launched AS (
  SELECT task_session_id AS id, count(*) AS subagents FROM r GROUP BY task_session_id),
per_session AS (
  SELECT s.id, s.task_id, launched.subagents
    FROM launched JOIN @extschema@.task_sessions AS s ON s.id = launched.id
  UNION ALL
  SELECT s.id, s.task_id, 0
    FROM @extschema@.task_sessions AS s
   WHERE s.started_at >= coalesce($1::timestamp, '-infinity') AND s.started_at < coalesce($2::timestamp, 'infinity')
     AND NOT EXISTS (SELECT 1 FROM launched WHERE launched.id = s.id))
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
