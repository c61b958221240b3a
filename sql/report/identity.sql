-- Which database this report describes, and the time span it covers: the window asked for ($1, $2;
-- NULL when open) and the first and last subagent observed in it. Times are UTC, RFC 3339.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT current_database() AS database,
       host(inet_server_addr()) AS server_address,
       inet_server_port() AS server_port,
       to_char($1::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS since,
       to_char($2::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS until,
       to_char(min(observed_at), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS first_observed,
       to_char(max(observed_at), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_observed,
       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS as_of
  FROM r;
