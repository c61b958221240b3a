-- Subagents per day (UTC) over the window: the last 90 days up to the newest subagent in it, every day
-- (days without subagents as 0), with the tokens reported that day (NULL when none was). Pick other days
-- with the window (--since/--until).
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')),
days AS (
  SELECT generate_series(greatest(date_trunc('day', min(observed_at)), date_trunc('day', max(observed_at)) - interval '89 days'),
                         date_trunc('day', max(observed_at)), interval '1 day') AS day
    FROM r)
SELECT to_char(days.day, 'YYYY-MM-DD') AS day,
       count(r.id) AS subagents,
       count(r.id) FILTER (WHERE r.is_async = 1) AS async,
       count(DISTINCT r.task_session_id) AS sessions,
       sum(r.total_tokens) AS total_tokens
  FROM days
  LEFT JOIN r ON date_trunc('day', r.observed_at) = days.day
 GROUP BY days.day
 ORDER BY days.day;
