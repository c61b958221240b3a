-- Counts and usage per subagent_type and per model, in one pass (dimension says which). Usage is "not
-- reported" (NULL), never 0: Claude's background (async_launched) dispatch never reports it. Sums,
-- averages and maxima cover reported values only and stay NULL when nothing was reported.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT CASE WHEN grouping(subagent_type) = 0 THEN 'subagent_type' ELSE 'model' END AS dimension,
       coalesce(CASE WHEN grouping(subagent_type) = 0 THEN subagent_type ELSE model END, '(not reported)') AS label,
       count(*) AS subagents,
       count(*) FILTER (WHERE is_async = 1) AS async,
       count(*) FILTER (WHERE total_tokens IS NOT NULL OR duration_ms IS NOT NULL OR tool_use_count IS NOT NULL) AS usage_reported,
       count(*) FILTER (WHERE total_tokens IS NULL AND duration_ms IS NULL AND tool_use_count IS NULL) AS usage_not_reported,
       sum(total_tokens) AS total_tokens,
       round(avg(total_tokens)) AS avg_tokens,
       max(total_tokens) AS max_tokens,
       round(avg(duration_ms)) AS avg_duration_ms,
       max(duration_ms) AS max_duration_ms,
       round(avg(tool_use_count), 1) AS avg_tool_uses
  FROM r
 GROUP BY GROUPING SETS ((subagent_type), (model))
 ORDER BY 1 DESC, count(*) DESC, 2;
