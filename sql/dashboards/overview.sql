-- One line of totals over the window. total_tokens sums reported values only and is NULL when none was
-- reported (NULL is "not reported", never 0).
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT count(*) AS subagents,
       count(*) FILTER (WHERE source = 'live') AS live,
       count(*) FILTER (WHERE source = 'backfill') AS backfill,
       count(DISTINCT task_session_id) AS sessions,
       count(DISTINCT turn_id) AS turns,
       count(*) FILTER (WHERE total_tokens IS NOT NULL OR duration_ms IS NOT NULL OR tool_use_count IS NOT NULL) AS usage_reported,
       count(*) FILTER (WHERE total_tokens IS NULL AND duration_ms IS NULL AND tool_use_count IS NULL) AS usage_not_reported,
       count(*) FILTER (WHERE subagent_type IS NULL) AS subagent_type_missing,
       sum(total_tokens) AS total_tokens,
       max(total_tokens) AS max_tokens,
       count(*) FILTER (WHERE agent_execution_id = 'unknown') AS unknown_execution
  FROM r;
