-- Capture statistics: the six counters (data layer: kept across upgrades; read by stats.sql).
-- Counted per qualifying message write (docs/decisions.md#stats).
--
-- Each counter is a sequence. nextval() never waits for another transaction and never takes a row lock,
-- so concurrent writers do not serialize on a hot counter row the way an UPDATE of a stats table would.
-- The price: counters are NOT transactional. A rolled-back message write still counts as attempted and
-- as whatever outcome it reached, and a counter moves even when the row it describes was rolled back.
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_attempted_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_skipped_no_identity_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_persisted_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_failed_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_anomalous_value_seq;
CREATE SEQUENCE IF NOT EXISTS @extschema@.subagent_context_unknown_execution_seq;
REVOKE ALL ON SEQUENCE
  @extschema@.subagent_context_attempted_seq, @extschema@.subagent_context_skipped_no_identity_seq,
  @extschema@.subagent_context_persisted_seq, @extschema@.subagent_context_failed_seq,
  @extschema@.subagent_context_anomalous_value_seq, @extschema@.subagent_context_unknown_execution_seq
  FROM PUBLIC;
