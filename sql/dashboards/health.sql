-- Capture health (SPEC §8): shortfall is the only alarm; excess is reported, never alarms.
SELECT activated, capture_since, backfill_through, shortfall, excess,
       to_char(last_observed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_observed_at,
       trigger_enabled, failures, collisions
  FROM @extschema@.subagent_context_health();
