-- Capture counters since installation (sequences: they only grow, and are not transactional), not windowed.
SELECT attempted, skipped_no_identity, persisted, failed, anomalous_value, unknown_execution
  FROM @extschema@.subagent_context_stats();
