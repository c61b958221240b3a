-- Capture statistics: the six counters (data layer: kept across upgrades; read by code/stats.sql), counted per
-- qualifying message write (docs/decisions.md#stats). Each is a sequence: nextval() never waits for another
-- transaction and never takes a row lock, so writers do not serialize on a hot counter row. The price:
-- counters are not transactional (a rolled-back write still counts).
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_attempted_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_skipped_no_identity_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_persisted_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_failed_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_anomalous_value_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_unknown_execution_seq;
REVOKE ALL ON SEQUENCE @extschema@.subagent_context_attempted_seq, @extschema@.subagent_context_skipped_no_identity_seq,
  @extschema@.subagent_context_persisted_seq, @extschema@.subagent_context_failed_seq,
  @extschema@.subagent_context_anomalous_value_seq, @extschema@.subagent_context_unknown_execution_seq FROM PUBLIC;

-- On Citus the trigger fires on the worker holding the message's shard and advances the sequences there:
-- every worker gets them too (Citus does not propagate sequences).
DO $citus_counters$
DECLARE
  distributed boolean := false;
BEGIN
  IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN  -- EXECUTE: the catalog exists only on Citus
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
       INTO distributed USING '@extschema@.task_session_messages'::regclass;
  END IF;
  IF distributed THEN
    PERFORM run_command_on_workers(format('CREATE SEQUENCE IF NOT EXISTS %s.%I', '@extschema@', s.relname))
       FROM pg_class AS s
      WHERE s.relkind = 'S' AND s.relnamespace = '@extschema@'::regnamespace
        AND s.relname IN ('subagent_context_attempted_seq', 'subagent_context_skipped_no_identity_seq',
                          'subagent_context_persisted_seq', 'subagent_context_failed_seq',
                          'subagent_context_anomalous_value_seq', 'subagent_context_unknown_execution_seq');
  END IF;
END
$citus_counters$;
