-- Settled vs still running. A subagent settles when its launching tool call reaches a terminal status.
-- For a synchronous subagent that is when its result comes back, so launch-to-settle is its run time.
-- A background (async) launch settles as soon as the launch returns, so its settle time says nothing
-- about the run (docs/decisions.md): its run time is known only where the agent reported duration_ms.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT count(*) FILTER (WHERE settled_at IS NOT NULL) AS settled,
       count(*) FILTER (WHERE settled_at IS NOT NULL AND is_async = 0) AS settled_sync,
       count(*) FILTER (WHERE settled_at IS NOT NULL AND is_async = 1) AS settled_async,
       count(*) FILTER (WHERE settled_at IS NULL) AS outstanding,
       count(*) FILTER (WHERE settled_at IS NULL AND is_async = 1) AS outstanding_async,
       to_char(min(observed_at) FILTER (WHERE settled_at IS NULL), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS oldest_outstanding_since,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM settled_at - observed_at))
                FILTER (WHERE is_async = 0))::numeric, 3) AS median_seconds_to_settle_sync,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms))::numeric / 1000, 3) AS median_reported_run_seconds,
       count(duration_ms) AS run_time_reported
  FROM r;
