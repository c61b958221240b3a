-- What `subagent-context metrics` exports while an earlier release is installed (the upgrade window,
-- docs/upgrade.md#the-upgrade-window; not a dashboard panel): that release's own verdict, health and
-- counters, read by column name, so that its shortfall still alerts before `up`. 0.2.0 and 0.3.0 have no
-- subagent_context_last_message_at(), which metrics.sql reads, and 0.2.0 no reconciled_at: what a release
-- does not have is NULL here, absent from the scrape. Any release from 0.2.0 on (0.1.0's health has no
-- verdict); on this release it gives what metrics.sql gives, without the newest message's time.
SELECT (h->>'activated')::boolean AS activated,
       @extschema@.subagent_context_trigger_state() IS NOT NULL AS trigger_installed,
       (h->>'trigger_enabled')::boolean AS trigger_enabled,
       (h->>'shortfall')::bigint AS shortfall, (h->>'excess')::bigint AS excess,
       (h->>'failures')::bigint AS failures, (h->>'collisions')::bigint AS collisions,
       h->>'status' AS status, h->>'installed_version' AS installed_version,
       extract(epoch FROM (h->>'last_observed_at')::timestamp)::float8 AS last_observed_seconds,
       extract(epoch FROM (h->>'reconciled_at')::timestamp)::float8 AS reconciled_seconds,
       extract(epoch FROM @extschema@.subagent_context_parse_key(h->>'capture_since'))::float8 AS capture_since_seconds,
       NULL::float8 AS last_message_seconds,
       (s->>'attempted')::bigint AS attempted, (s->>'skipped_no_identity')::bigint AS skipped_no_identity,
       (s->>'persisted')::bigint AS persisted, (s->>'failed')::bigint AS failed,
       (s->>'anomalous_value')::bigint AS anomalous_value, (s->>'unknown_execution')::bigint AS unknown_execution
  FROM (SELECT to_jsonb(x) AS h FROM @extschema@.subagent_context_health() AS x) AS health,
       (SELECT to_jsonb(y) AS s FROM @extschema@.subagent_context_stats() AS y) AS stats;
