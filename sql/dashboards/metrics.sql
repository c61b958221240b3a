-- What `subagent-context metrics` exports in the Prometheus text format: health as gauges (times as Unix
-- seconds; NULL when unknown, e.g. before activation), health's one verdict (status) and the installed
-- version, and the capture counters. last_message_seconds is the newest subagent message created since
-- activation (what capture should have seen; the "capture stalled while messages keep arriving" alert
-- compares it with the newest row). Every function here is callable with USAGE on the schema alone.
SELECT h.activated,
       @extschema@.subagent_context_trigger_state() IS NOT NULL AS trigger_installed,
       h.trigger_enabled,
       h.shortfall, h.excess, h.failures, h.collisions, h.uncompared,
       h.status, h.installed_version,
       extract(epoch FROM h.last_observed_at)::float8 AS last_observed_seconds,
       extract(epoch FROM h.reconciled_at)::float8 AS reconciled_seconds,
       extract(epoch FROM @extschema@.subagent_context_parse_key(h.capture_since))::float8 AS capture_since_seconds,
       extract(epoch FROM @extschema@.subagent_context_last_message_at())::float8 AS last_message_seconds,
       s.attempted, s.skipped_no_identity, s.persisted, s.failed, s.anomalous_value, s.unknown_execution
  FROM @extschema@.subagent_context_health() AS h,
       @extschema@.subagent_context_stats() AS s;
