-- The child's own status as the agent reported it (open vocabulary, verbatim), with how many of each
-- reported usage.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT coalesce(agent_status, '(absent)') AS agent_status,
       count(*) AS subagents,
       count(*) FILTER (WHERE total_tokens IS NOT NULL OR duration_ms IS NOT NULL OR tool_use_count IS NOT NULL) AS usage_reported,
       count(*) FILTER (WHERE model IS NOT NULL) AS model_reported
  FROM r
 GROUP BY 1
 ORDER BY count(*) DESC, 1;
