-- Subagents per day (UTC): the last 90 days of the window, up to the day of its newest subagent (fewer
-- when the window's first subagent is more recent), every day (days without subagents as 0), with the
-- tokens reported that day (NULL when none was). Only those days are read: the window's first and newest
-- subagent come from the observed_at index, then the rows from 89 days before the newest one's day on.
-- Pick other days with the window (--since/--until).
WITH ends AS (
  SELECT date_trunc('day', min(observed_at)) AS first_day, date_trunc('day', max(observed_at)) AS last_day
    FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')),
r AS (
  SELECT t.id, t.observed_at, t.is_async, t.task_session_id, t.total_tokens
    FROM ends, @extschema@.task_session_subagents AS t
   WHERE t.observed_at >= coalesce($1::timestamp, '-infinity') AND t.observed_at < coalesce($2::timestamp, 'infinity')
     AND t.observed_at >= ends.last_day - interval '89 days'),
days AS (
  SELECT generate_series(greatest(first_day, last_day - interval '89 days'), last_day, interval '1 day') AS day
    FROM ends)
SELECT to_char(days.day, 'YYYY-MM-DD') AS day,
       count(r.id) AS subagents,
       count(r.id) FILTER (WHERE r.is_async = 1) AS async,
       count(DISTINCT r.task_session_id) AS sessions,
       sum(r.total_tokens) AS total_tokens
  FROM days
  LEFT JOIN r ON date_trunc('day', r.observed_at) = days.day
 GROUP BY days.day
 ORDER BY days.day;
