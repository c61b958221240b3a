-- Subagents first observed per hour, by source, over the dashboard's time range. Grafana only: it uses
-- Grafana's time-range macros. observed_at holds UTC wall-clock time, as the macros expect.
SELECT $__timeGroupAlias(observed_at, 1h), source AS metric, count(*) AS subagents
  FROM @extschema@.task_session_subagents
 WHERE $__timeFilter(observed_at)
 GROUP BY 1, 2
 ORDER BY 1, 2;
