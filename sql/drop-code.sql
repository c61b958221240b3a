-- The first file of the code layer (sql/loader.js): drops the code of this and every earlier
-- release, so the files after it create exactly this release's code, whatever was there. Internal.
--
-- Kept: capture_subagent_message() and its trigger. capture.sql replaces the function in place and
-- re-creates the trigger keeping its ENABLE state; dropping them would drop that state with them.
-- Data is never touched here (the table, the failure log, the counters, the activation keys).
--
-- Message writers wait for this transaction (about as long as the install takes): the lock is the one
-- CREATE TRIGGER takes anyway, taken first so that no write runs half on old code, half on new.
LOCK TABLE @extschema@.task_session_messages IN SHARE ROW EXCLUSIVE MODE;

-- Every function any release has created, by its signature in that release. A release that adds,
-- renames or changes the signature of a function adds the old signature here.
DROP PROCEDURE IF EXISTS @extschema@.subagent_context_reconcile_all();
DROP FUNCTION IF EXISTS
  @extschema@.subagent_context_installation(),
  @extschema@.subagent_context_repair(integer),
  @extschema@.subagent_context_missing(),
  @extschema@.subagent_context_discrepancies(),
  @extschema@.subagent_context_reconcile(integer, interval),
  @extschema@.subagent_context_reconciled(timestamp),
  @extschema@.subagent_context_compare(timestamp, timestamp, timestamp),
  @extschema@.subagent_message_keys(timestamp, timestamp),
  @extschema@.subagent_context_topology(),
  @extschema@.subagent_context_repair(),
  @extschema@.subagent_context_health(),
  @extschema@.subagent_context_window(timestamp),
  @extschema@.subagent_row_keys(timestamp),
  @extschema@.subagent_message_keys(timestamp),
  @extschema@.subagent_context_backfill(),
  @extschema@.subagent_context_backfill_step(integer),
  @extschema@.subagent_store_history_batch(timestamp, text, integer, timestamp),
  @extschema@.subagent_store_history_rows(@extschema@.subagent_row[]),
  @extschema@.subagent_store_history(timestamp, timestamp),
  @extschema@.subagent_store_history(timestamp),
  @extschema@.subagent_history_rows(timestamp, timestamp),
  @extschema@.subagent_context_key(text),
  @extschema@.subagent_context_parse_key(text),
  @extschema@.subagent_context_format_key(timestamp),
  @extschema@.subagent_context_stats(),
  @extschema@.subagent_context_counter(regclass),
  @extschema@.subagent_context_trigger_state(),
  @extschema@.derive_subagent_row(text, text, text, jsonb, timestamp, timestamp, text),
  @extschema@.subagent_execution_id(jsonb, text),
  @extschema@.subagent_has_identity(text, text, jsonb),
  @extschema@.subagent_flag(jsonb),
  @extschema@.subagent_is_terminal_status(text),
  @extschema@.subagent_has_anomaly(jsonb),
  @extschema@.subagent_metric_is_anomalous(jsonb),
  @extschema@.subagent_count(jsonb),
  @extschema@.subagent_text_field(jsonb, text),
  @extschema@.subagent_text(jsonb, text),
  @extschema@.subagent_qualifies(jsonb),
  @extschema@.subagent_may_qualify(text),
  @extschema@.subagent_parse_metadata(text),
  @extschema@.subagent_parse_metadata_guarded(text);
DROP PROCEDURE IF EXISTS @extschema@.subagent_context_backfill_run(integer);
DROP TYPE IF EXISTS @extschema@.subagent_row;
