-- Still running: subagents observed in the window whose launching call has not settled, oldest first,
-- with their age (seconds since first observed, against the server's clock). At most 20 are listed;
-- settlement.sql counts them all. An outstanding row can also be one whose execution ended without a
-- final frame.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT task_id, task_session_id, tool_call_id, subagent_type, model, agent_status, tool_status,
       is_async = 1 AS async,
       to_char(observed_at, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS observed_at,
       round(extract(epoch FROM (now() AT TIME ZONE 'UTC') - observed_at)::numeric) AS age_seconds
  FROM r
 WHERE settled_at IS NULL
 ORDER BY r.observed_at, r.task_session_id, r.tool_call_id
 LIMIT 20;
