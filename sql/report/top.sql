-- The cards and the sessions that launched the most subagents in the window, and the ones whose
-- subagents reported the most tokens: the top 10 of each ranking at each level (level 'card' or
-- 'session'; rank_by_subagents, rank_by_tokens; one can be in both). Tokens sum reported values only;
-- NULL when none of its subagents reported any. `sessions` is a card's count of them (NULL for a session).
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')),
per AS (
  SELECT CASE WHEN GROUPING(task_session_id) = 0 THEN 'session' ELSE 'card' END AS level,
         CASE WHEN GROUPING(task_session_id) = 0 THEN task_session_id ELSE task_id END AS id,
         min(task_id) AS task_id,
         CASE WHEN GROUPING(task_session_id) = 1 THEN count(DISTINCT task_session_id) END AS sessions,
         count(*) AS subagents, count(*) FILTER (WHERE is_async = 1) AS async,
         count(DISTINCT turn_id) AS turns, sum(total_tokens) AS total_tokens,
         count(*) FILTER (WHERE total_tokens IS NULL AND duration_ms IS NULL AND tool_use_count IS NULL) AS usage_not_reported
    FROM r
   GROUP BY GROUPING SETS ((task_id), (task_session_id))),
ranked AS (
  SELECT per.*,
         row_number() OVER (PARTITION BY level ORDER BY subagents DESC, id) AS rank_by_subagents,
         CASE WHEN total_tokens IS NOT NULL
              THEN row_number() OVER (PARTITION BY level ORDER BY total_tokens DESC NULLS LAST, id) END AS rank_by_tokens
    FROM per)
SELECT * FROM ranked
 WHERE rank_by_subagents <= 10 OR rank_by_tokens <= 10
 ORDER BY level, rank_by_subagents;
