-- Capture health (docs/health.md): `status` is the one verdict; shortfall is the only alarm, excess is
-- reported and never alarms.
SELECT activated, capture_since, backfill_through, shortfall, excess,
       to_char(last_observed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_observed_at,
       trigger_enabled, failures, collisions, status, installed_version,
       to_char(reconciled_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS reconciled_at, uncompared
  FROM @extschema@.subagent_context_health();
