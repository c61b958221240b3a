-- The reconciliation's record (data layer: kept across upgrades, and by pg_dump / pg_restore). Internal;
-- operators may read it (docs/health.md#reconciliation).
--
-- A reconciliation compares every qualifying message created since capture_since with the rows, in bounded
-- steps (code/reconcile.sql); one row per run says what it compared, up to where and when.
CREATE TABLE IF NOT EXISTS @extschema@.subagent_context_reconciliations (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  capture_since     timestamp(6) NOT NULL,  -- the activation it compared from: another key invalidates it
  started_at        timestamp(6) NOT NULL,  -- its end of history: messages created before this are compared
  method            text NOT NULL,          -- the code layer that compared (its digest): another release recompares
  compared_through  timestamp(6) NOT NULL,  -- messages created in [capture_since, compared_through) are done
  messages_compared bigint NOT NULL DEFAULT 0,
  steps             integer NOT NULL DEFAULT 0,
  updated_at        timestamp(6) NOT NULL,
  completed_at      timestamp(6)
);

-- The excess keys a run found (rows with no qualifying message); kind 'missing' is an earlier release's.
CREATE TABLE IF NOT EXISTS @extschema@.subagent_context_reconciliation_keys (
  reconciliation_id bigint NOT NULL
                    REFERENCES @extschema@.subagent_context_reconciliations (id) ON DELETE CASCADE,
  kind              text NOT NULL CHECK (kind IN ('missing', 'excess')),
  task_session_id   text NOT NULL,
  tool_call_id      text NOT NULL
);

-- Every (session, tool call) that a comparison found without its row: health, a reconciliation step or
-- repair. A found miss stays here until its key has a row, whatever reconciliation completes meanwhile;
-- a completed reconciliation drops only the keys it compared after they were last seen missing and did not
-- find missing again (their message no longer qualifies).
CREATE TABLE IF NOT EXISTS @extschema@.subagent_context_missing_keys (
  capture_since      timestamp(6) NOT NULL,  -- the activation it was found under
  task_session_id    text NOT NULL,
  tool_call_id       text NOT NULL,
  message_created_at timestamp(6) NOT NULL,  -- the newest created_at of its qualifying messages: where repair looks
  found_at           timestamp(6) NOT NULL,
  confirmed_at       timestamp(6) NOT NULL   -- the last time a comparison found it missing
);
-- Each index created when missing: CREATE INDEX IF NOT EXISTS would lock the table before it looks, and hold
-- it (against health's and repair's records) while the code layer after it is created.
DO $indexes$
BEGIN
  -- One entry per key and kind. The ids are agent-written text of any length (a btree entry holds ~2.7 kB),
  -- so the key is unique by a digest of them.
  IF pg_catalog.to_regclass('@extschema@.subagent_context_reconciliation_keys_key') IS NULL THEN
    CREATE UNIQUE INDEX subagent_context_reconciliation_keys_key
      ON @extschema@.subagent_context_reconciliation_keys
         (reconciliation_id, kind, md5(task_session_id || E'\x1f' || tool_call_id));
  END IF;
  IF pg_catalog.to_regclass('@extschema@.subagent_context_missing_keys_key') IS NULL THEN
    CREATE UNIQUE INDEX subagent_context_missing_keys_key
      ON @extschema@.subagent_context_missing_keys
         (capture_since, md5(task_session_id || E'\x1f' || tool_call_id));
  END IF;
  -- Repair walks them in this order.
  IF pg_catalog.to_regclass('@extschema@.subagent_context_missing_keys_order') IS NULL THEN
    CREATE INDEX subagent_context_missing_keys_order
      ON @extschema@.subagent_context_missing_keys (capture_since, message_created_at);
  END IF;
END
$indexes$;

REVOKE ALL ON @extschema@.subagent_context_reconciliations FROM PUBLIC;
REVOKE ALL ON @extschema@.subagent_context_reconciliation_keys FROM PUBLIC;
REVOKE ALL ON @extschema@.subagent_context_missing_keys FROM PUBLIC;
