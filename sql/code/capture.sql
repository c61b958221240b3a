-- Capture (docs/decisions.md#derivation, #merge-and-identity): the trigger subagent_context_capture turns
-- each qualifying message write into one upsert of task_session_subagents. WHEN prefilter -> parse ->
-- subagent_context_merge_message(): subagent_context_derive_row (code/derive.sql) and one INSERT ... ON CONFLICT DO UPDATE whose
-- SET clause is the whole merge, so concurrent writers of a key converge in any commit order; `repair`
-- replays a failed capture through the same function.
--
-- Never breaks the message write: everything after the WHEN clause runs in one EXCEPTION block (a
-- subtransaction: docs/bulk-loads.md), and any fault is warned, recorded in subagent_context_failures, and
-- the write goes on. Never makes it wait long: a host's statement_timeout cancel cannot be caught, so our
-- lock waits end after 200 ms as a recorded failure (55P03). SECURITY DEFINER with a pinned search_path:
-- writers need no privilege on the subagent table, and their objects cannot hijack it (docs/security.md).

-- The one upsert: the row derived from a message, merged into its row (docs/decisions.md#merge-and-identity).
-- Returns 1 when a row was stored, 0 when the document does not qualify or lacks an identity. Internal.
CREATE FUNCTION @extschema@.subagent_context_merge_message(
  message_session_id text, message_task_id text, message_turn_id text, doc jsonb,
  message_created_at timestamp, message_updated_at timestamp, execution_id text, row_source text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  stored integer;
BEGIN
  -- The columns are named (a table adopted from kandev may have more): id and source, then
  -- subagent_context_row's (code/derive.sql), in its order.
  INSERT INTO @extschema@.task_session_subagents AS s (id, source,
    task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, parent_tool_call_id,
    subagent_type, description, agent_id, child_session_id, model, agent_status, tool_status,
    is_async, total_tokens, tool_use_count, duration_ms, observed_at, settled_at, updated_at)
  SELECT gen_random_uuid()::text, row_source, d.*
    FROM @extschema@.subagent_context_derive_row(message_session_id, message_task_id, message_turn_id, doc,
           message_created_at, message_updated_at, execution_id) AS d
  ON CONFLICT (task_session_id, agent_execution_id, tool_call_id) DO UPDATE SET
    -- id, task_id, agent_execution_id, source, observed_at: never changed.
    turn_id             = coalesce(s.turn_id, EXCLUDED.turn_id),
    parent_tool_call_id = coalesce(EXCLUDED.parent_tool_call_id, s.parent_tool_call_id),
    subagent_type       = coalesce(EXCLUDED.subagent_type, s.subagent_type),
    description         = coalesce(EXCLUDED.description, s.description),
    agent_id            = coalesce(EXCLUDED.agent_id, s.agent_id),
    child_session_id    = coalesce(EXCLUDED.child_session_id, s.child_session_id),
    model               = coalesce(EXCLUDED.model, s.model),
    agent_status        = coalesce(EXCLUDED.agent_status, s.agent_status),
    total_tokens        = coalesce(EXCLUDED.total_tokens, s.total_tokens),
    tool_use_count      = coalesce(EXCLUDED.tool_use_count, s.tool_use_count),
    duration_ms         = coalesce(EXCLUDED.duration_ms, s.duration_ms),
    tool_status         = CASE WHEN s.settled_at IS NOT NULL THEN s.tool_status
                               ELSE coalesce(EXCLUDED.tool_status, s.tool_status) END,
    settled_at          = coalesce(s.settled_at, EXCLUDED.settled_at),
    is_async            = greatest(s.is_async, EXCLUDED.is_async),
    updated_at          = greatest(s.updated_at, EXCLUDED.updated_at);
  GET DIAGNOSTICS stored = ROW_COUNT;
  RETURN stored;
END
$$;

-- Records a failed or deferred capture of a message (docs/reliability.md#failure-log): one open row per
-- message. A message whose failure is not replayed yet gets its occurrence counted and its latest cause on
-- that row; otherwise a new row. Writers of one message hold its row lock while they record, so two of
-- them never both insert. Internal (the trigger).
CREATE FUNCTION @extschema@.subagent_context_record_failure(
  message_session_id text, call_id text, failed_message_id text, execution_id text,
  fault_state text, fault_message text, fault_detail text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  now_utc timestamp := clock_timestamp() AT TIME ZONE 'UTC';
BEGIN
  -- A value that did not change is written back as the stored one, not as the new copy: the row version
  -- then shares its TOASTed value (a 3 kB execution id is not stored again per frame) and, no indexed
  -- column changing, stays on its page (HOT).
  UPDATE @extschema@.subagent_context_failures AS f
     SET occurrences = f.occurrences + 1, last_occurred_at = now_utc,
         tool_call_id = CASE WHEN call_id IS NULL OR call_id = f.tool_call_id THEN f.tool_call_id ELSE call_id END,
         agent_execution_id = CASE WHEN execution_id IS NOT DISTINCT FROM f.agent_execution_id THEN f.agent_execution_id ELSE execution_id END,
         sqlstate = fault_state,
         message = CASE WHEN fault_message = f.message THEN f.message ELSE fault_message END,
         detail = CASE WHEN fault_detail IS NOT DISTINCT FROM f.detail THEN f.detail ELSE fault_detail END
   WHERE f.message_id = failed_message_id AND f.replayed_at IS NULL
     AND f.task_session_id = message_session_id;  -- the distribution column on Citus: one shard
  IF NOT FOUND THEN
    INSERT INTO @extschema@.subagent_context_failures
      (occurred_at, task_session_id, tool_call_id, message_id, agent_execution_id, sqlstate, message, detail)
    VALUES (now_utc, message_session_id, call_id, failed_message_id, execution_id, fault_state, fault_message, fault_detail);
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.subagent_context_capture_message()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '200ms'
AS $capture$
DECLARE
  doc            jsonb;   -- stays NULL when the metadata does not parse
  call_execution text;
  call_id        text;
  anomalous      boolean := false;
  now_utc        timestamp;
  counted        bigint;
  fault_state    text;
  fault_message  text;
  fault_detail   text;
BEGIN
  BEGIN
    -- A document too large to parse within kandev's budget is not parsed here: its capture is recorded as
    -- deferred and `repair` completes it (docs/reliability.md#large-documents). octet_length of a stored
    -- value reads its header, not the document; the limit is read only past 1 MB, its lowest value.
    IF octet_length(NEW.metadata) > 1048576
       AND octet_length(NEW.metadata) > @extschema@.subagent_context_capture_max_bytes() THEN
      counted := nextval('@extschema@.subagent_context_attempted_seq') + nextval('@extschema@.subagent_context_failed_seq');
      PERFORM @extschema@.subagent_context_record_failure(NEW.task_session_id, NULL, NEW.id,
        nullif(current_setting('subagent_context.agent_execution_id', true), ''), '54000',
        format('capture deferred: a document of %s bytes is larger than subagent_context.capture_max_bytes (%s); `repair` stores its row',
               octet_length(NEW.metadata), @extschema@.subagent_context_capture_max_bytes()), NULL);
      RETURN NULL;
    END IF;
    doc := NEW.metadata::jsonb;
    IF NOT @extschema@.subagent_context_qualifies(doc) THEN
      RETURN NULL;
    END IF;
    counted := nextval('@extschema@.subagent_context_attempted_seq');
    IF NOT @extschema@.subagent_context_has_identity(NEW.task_session_id, NEW.task_id, doc) THEN
      counted := nextval('@extschema@.subagent_context_skipped_no_identity_seq');
      RETURN NULL;
    END IF;
    -- Most frames carry no metric at all (async launches); only test them when one is there.
    IF doc #> '{normalized,subagent_task}' ?| ARRAY['total_tokens', 'tool_use_count', 'duration_ms'] THEN
      anomalous := @extschema@.subagent_context_has_anomaly(doc);
    END IF;
    call_execution := @extschema@.subagent_context_execution_id(doc,
                      current_setting('subagent_context.agent_execution_id', true));
    -- The clock, read once: it stands in for a missing created_at or updated_at.
    now_utc := clock_timestamp() AT TIME ZONE 'UTC';
    counted := @extschema@.subagent_context_merge_message(NEW.task_session_id, NEW.task_id, NEW.turn_id, doc,
                 coalesce(NEW.created_at, now_utc), coalesce(NEW.updated_at, now_utc), call_execution, 'live');

    counted := nextval('@extschema@.subagent_context_persisted_seq')
             + CASE WHEN call_execution = 'unknown'
                    THEN nextval('@extschema@.subagent_context_unknown_execution_seq') ELSE 0 END
             + CASE WHEN anomalous THEN nextval('@extschema@.subagent_context_anomalous_value_seq') ELSE 0 END;
  EXCEPTION WHEN OTHERS THEN
    IF doc IS NULL THEN
      RETURN NULL;  -- metadata is not JSON (or not representable as jsonb): not a subagent call
    END IF;
    call_id := @extschema@.subagent_context_text_field(doc, 'tool_call_id');  -- for the report only
    GET STACKED DIAGNOSTICS fault_state = RETURNED_SQLSTATE, fault_message = MESSAGE_TEXT,
                            fault_detail = PG_EXCEPTION_DETAIL;
    -- The ids and the message are cut short here (the failures table keeps them whole): a hostile 1 MB
    -- session or tool_call_id must not become a 1 MB line in the client's notices and the server log.
    RAISE WARNING 'subagent-context: capture failed for session %, tool call % (SQLSTATE %): %',
      left(NEW.task_session_id, 200), coalesce(left(call_id, 200), '?'), fault_state, left(fault_message, 500);
    BEGIN
      PERFORM nextval('@extschema@.subagent_context_failed_seq');
      IF anomalous THEN
        PERFORM nextval('@extschema@.subagent_context_anomalous_value_seq');
      END IF;
      PERFORM @extschema@.subagent_context_record_failure(NEW.task_session_id, call_id, NEW.id, call_execution,
                fault_state, fault_message, nullif(fault_detail, ''));
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'subagent-context: could not record that failure either (SQLSTATE %): %', SQLSTATE, SQLERRM;
    END;
  END;
  RETURN NULL;
END
$capture$;

REVOKE ALL ON FUNCTION @extschema@.subagent_context_capture_message() FROM PUBLIC;

-- The capture trigger's state, pg_trigger.tgenabled: 'O' fires in normal sessions, 'A' always, 'R' only
-- on replicas, 'D' disabled; NULL when the trigger is missing. Internal: the one place that looks the
-- trigger up, for the re-creation below, activation (code/backfill.sql), health and metrics.
CREATE FUNCTION @extschema@.subagent_context_trigger_state()
RETURNS "char" LANGUAGE plpgsql STABLE
AS $$
BEGIN
  RETURN (SELECT t.tgenabled FROM pg_catalog.pg_trigger AS t
           WHERE t.tgrelid = '@extschema@.task_session_messages'::regclass
             AND t.tgname = 'subagent_context_capture');
END
$$;
