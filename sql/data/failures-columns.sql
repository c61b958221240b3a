-- subagent_context_failures' columns and indexes that releases after the first added (data/failures.sql
-- creates the table). Data layer. After guards/lock-host.sql, which holds kandev's tables, so no capture
-- is recording a failure here meanwhile: adding a column takes the table whole. Each is added only when
-- missing, so an upgrade that adds nothing locks nothing (ALTER TABLE ... IF NOT EXISTS and CREATE INDEX
-- IF NOT EXISTS lock the table before they look). Added columns only, with defaults: an earlier release,
-- rolled back to, still inserts rows here as it did.
DO $failures$
DECLARE
  failures constant regclass := '@extschema@.subagent_context_failures'::regclass;
  missing text;
BEGIN
  SELECT pg_catalog.string_agg(pg_catalog.format('ADD COLUMN %I %s', c.name, c.definition), ', ' ORDER BY c.pos)
    INTO missing
    FROM (VALUES
           -- When `repair` re-derived the row from the message as it is now (NULL: not yet).
           (1, 'replayed_at', 'timestamp(6)'),
           -- 0.5.0: one open row per message (docs/reliability.md#failure-log). A capture that fails again for a
           -- message whose failure is not replayed yet counts the occurrence on that row instead of adding one
           -- per frame, under the message's own row lock (two writers of one message never record at once).
           (2, 'occurrences', 'integer NOT NULL DEFAULT 1'),
           (3, 'last_occurred_at', 'timestamp(6)'),
           -- Why replay leaves this failure for good (NULL: it does not): 'key_too_long' (the row's key is
           -- larger than a btree entry of the unique key holds), 'value_not_storable' (the write fails on the
           -- data itself, SQLSTATE class 22 or 54). Set once by `repair`; health reports these apart from the
           -- stale ones.
           (4, 'stays_because', 'text')) AS c(pos, name, definition)
   WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute AS a
                      WHERE a.attrelid = failures AND a.attname = c.name AND a.attnum > 0 AND NOT a.attisdropped);
  IF missing IS NOT NULL THEN
    EXECUTE pg_catalog.format('ALTER TABLE %s %s', failures, missing);
  END IF;
  IF pg_catalog.to_regclass('@extschema@.subagent_context_failures_occurred_idx') IS NULL THEN
    CREATE INDEX subagent_context_failures_occurred_idx ON @extschema@.subagent_context_failures (occurred_at);
  END IF;
  -- Capture finds a message's open failure through this index (a few entries: only open failures).
  IF pg_catalog.to_regclass('@extschema@.subagent_context_failures_open_message_idx') IS NULL THEN
    CREATE INDEX subagent_context_failures_open_message_idx
      ON @extschema@.subagent_context_failures (message_id) WHERE replayed_at IS NULL;
  END IF;
END
$failures$;
