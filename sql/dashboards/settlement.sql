-- Settled vs outstanding: a subagent settles when its launching tool call reaches a terminal status.
-- Outstanding ones are still running, or their execution ended without a final frame.
SELECT count(*) FILTER (WHERE settled_at IS NOT NULL) AS settled,
       count(*) FILTER (WHERE settled_at IS NULL) AS outstanding,
       count(*) FILTER (WHERE settled_at IS NULL AND is_async = 1) AS outstanding_async,
       to_char(min(observed_at) FILTER (WHERE settled_at IS NULL), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS oldest_outstanding_since,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM settled_at - observed_at)))::numeric, 3) AS median_seconds_to_settle
  FROM @extschema@.task_session_subagents;
