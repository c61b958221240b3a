-- What `subagent-context metrics` exports in the Prometheus text format: health as gauges (times as Unix
-- seconds; NULL when unknown, e.g. before activation) and the capture counters.
SELECT h.activated,
       EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS t
                WHERE t.tgrelid = '@extschema@.task_session_messages'::regclass
                  AND t.tgname = 'subagent_context_capture') AS trigger_installed,
       h.trigger_enabled,
       h.shortfall, h.excess, h.failures, h.collisions,
       extract(epoch FROM h.last_observed_at)::float8 AS last_observed_seconds,
       extract(epoch FROM @extschema@.subagent_context_parse_key(h.capture_since))::float8 AS capture_since_seconds,
       s.attempted, s.skipped_no_identity, s.persisted, s.failed, s.anomalous_value, s.unknown_execution
  FROM @extschema@.subagent_context_health() AS h,
       @extschema@.subagent_context_stats() AS s;
