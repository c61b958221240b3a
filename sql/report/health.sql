-- Capture health (docs/health.md), not windowed: `status` is the one verdict; shortfall is the only
-- alarm, excess is reported and never alarms.
SELECT activated, capture_since, backfill_through, shortfall, excess,
       to_char(last_observed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_observed_at,
       trigger_enabled, failures, collisions, status, installed_version
  FROM @extschema@.subagent_context_health();
