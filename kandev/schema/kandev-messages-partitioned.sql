-- kandev's task_session_messages as large deployments run it (docs/partitioning.md): declaratively partitioned by
-- range of created_at, primary key (id, created_at) (a primary key of a partitioned table must include
-- the partition key). A fixture: it replaces the plain, empty table that kandev-host.sql created.
-- Columns, defaults and NOT NULLs are copied from that table (LIKE), so the two fixtures cannot drift;
-- the foreign keys and indexes are those of kandev-host.sql. Partitions are a separate file
-- (kandev-messages-partitions.sql): pg_partman wants a parent with none.
DO $partitioned$
BEGIN
  IF (SELECT c.relkind FROM pg_class AS c
       WHERE c.oid = '@extschema@.task_session_messages'::regclass) = 'p' THEN
    RETURN;  -- already partitioned
  END IF;
  IF EXISTS (SELECT 1 FROM @extschema@.task_session_messages) THEN
    RAISE EXCEPTION 'the fixture replaces an empty task_session_messages only; this one has rows';
  END IF;
  CREATE TABLE @extschema@.task_session_messages_partitioned (
    LIKE @extschema@.task_session_messages INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (id, created_at)
  ) PARTITION BY RANGE (created_at);
  DROP TABLE @extschema@.task_session_messages;
  ALTER TABLE @extschema@.task_session_messages_partitioned RENAME TO task_session_messages;
  ALTER INDEX @extschema@.task_session_messages_partitioned_pkey RENAME TO task_session_messages_pkey;
  ALTER TABLE @extschema@.task_session_messages
    ADD FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE,
    ADD FOREIGN KEY (turn_id) REFERENCES @extschema@.task_session_turns (id) ON DELETE CASCADE;
  CREATE INDEX task_session_messages_session_idx ON @extschema@.task_session_messages (task_session_id, created_at);
  CREATE INDEX task_session_messages_turn_idx ON @extschema@.task_session_messages (turn_id);
END
$partitioned$;
