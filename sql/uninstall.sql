-- Uninstall: stop capturing and remove the code. The data stays: task_session_subagents and
-- subagent_context_failures are dropped only by uninstall-data.sql.
-- The activation keys are removed, because they claim "captured since": after an uninstall that is no
-- longer true. A later install backfills the gap (existing rows win) and publishes fresh keys.
DROP TRIGGER IF EXISTS subagent_context_capture ON @extschema@.task_session_messages;
DROP FUNCTION IF EXISTS
  @extschema@.capture_subagent_message(),
  @extschema@.subagent_context_repair(),
  @extschema@.subagent_context_health(),
  @extschema@.subagent_context_window(timestamp),
  @extschema@.subagent_row_keys(timestamp),
  @extschema@.subagent_message_keys(timestamp),
  @extschema@.subagent_context_backfill(),
  @extschema@.subagent_store_history(timestamp, timestamp),
  @extschema@.subagent_history_rows(timestamp, timestamp),
  @extschema@.subagent_context_key(text),
  @extschema@.subagent_context_parse_key(text),
  @extschema@.subagent_context_format_key(timestamp),
  @extschema@.subagent_context_stats(),
  @extschema@.subagent_context_counter(regclass),
  @extschema@.derive_subagent_row(text, text, text, jsonb, timestamp, timestamp, text),
  @extschema@.subagent_execution_id(jsonb, text),
  @extschema@.subagent_has_identity(text, text, jsonb),
  @extschema@.subagent_flag(jsonb),
  @extschema@.subagent_is_terminal_status(text),
  @extschema@.subagent_has_anomaly(jsonb),
  @extschema@.subagent_metric_is_anomalous(jsonb),
  @extschema@.subagent_count(jsonb),
  @extschema@.subagent_text_field(jsonb, text),
  @extschema@.subagent_qualifies(jsonb),
  @extschema@.subagent_may_qualify(text),
  @extschema@.subagent_parse_metadata(text),
  @extschema@.subagent_parse_metadata_guarded(text);
DROP TYPE IF EXISTS @extschema@.subagent_row;
DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx;
DROP SEQUENCE IF EXISTS
  @extschema@.subagent_context_attempted_seq, @extschema@.subagent_context_skipped_no_identity_seq,
  @extschema@.subagent_context_persisted_seq, @extschema@.subagent_context_failed_seq,
  @extschema@.subagent_context_anomalous_value_seq, @extschema@.subagent_context_unknown_execution_seq;
DELETE FROM @extschema@.kandev_meta
 WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through');
