-- subagent_context_backfill_progress (data layer; internal): how far the backfill has walked history,
-- so that a backfill stopped part-way (killed, cancelled, a failed batch) continues where it stopped.
-- At most one row; it exists only while a backfill is under way, and goes when the activation keys are
-- written. `uninstall` drops the table with the keys (docs/reliability.md#backfill).
--   walked_created_at, walked_id  the oldest message visited so far (the walk goes newest first);
--                                 NULL before the first batch
--   newest                        the newest created_at among qualifying messages with full identity seen
--                                 so far: backfill_through once the walk is complete
CREATE TABLE IF NOT EXISTS @extschema@.subagent_context_backfill_progress (
  singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  started_at         timestamp(6) NOT NULL DEFAULT (clock_timestamp() AT TIME ZONE 'UTC'),
  updated_at         timestamp(6) NOT NULL DEFAULT (clock_timestamp() AT TIME ZONE 'UTC'),
  walked_created_at  timestamp(6),
  walked_id          text,
  newest             timestamp(6),
  batches            bigint NOT NULL DEFAULT 0,
  scanned            bigint NOT NULL DEFAULT 0,
  inserted           bigint NOT NULL DEFAULT 0
);
REVOKE ALL ON @extschema@.subagent_context_backfill_progress FROM PUBLIC;
