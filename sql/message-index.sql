-- Health's index on task_session_messages (data layer): the one index this product adds to kandev's
-- own table. Internal. Built CONCURRENTLY, so message writers go on while it is built (a plain CREATE
-- INDEX would hold their writes for a whole scan of the table). CONCURRENTLY cannot run in a transaction
-- block, so the activation migration runs the statements of this file one at a time; they are separated
-- by `-- statement`.
--
-- Health, the reconciliation, the backfill and repair read the messages that may qualify, by created_at.
-- The predicate is the capture prefilter spelled out (MAY_QUALIFY in sql/loader.js), so the index depends on
-- no function: only messages that spell subagent_task get an entry. Its comment names the prefilter
-- (HEALTH_INDEX in sql/loader.js): an index built by an earlier release with another one is replaced
-- without blocking writers (a new one is built beside it, then the old one is dropped), and health stays
-- correct meanwhile (it reads the table where no index fits). Other messages pay the predicate per INSERT
-- and per non-HOT UPDATE; subagent frames one btree insert per new row version.

-- An interrupted build leaves an INVALID index that IF NOT EXISTS would keep; one built by an earlier
-- release with another predicate is set aside to be dropped once its replacement is built.
DO $prepare$
DECLARE
  current regclass := to_regclass('@extschema@.subagent_context_recent_messages_idx');
  old regclass := to_regclass('@extschema@.subagent_context_recent_messages_idx_old');
BEGIN
  IF old IS NOT NULL AND NOT (SELECT indisvalid FROM pg_index WHERE indexrelid = old) THEN
    DROP INDEX @extschema@.subagent_context_recent_messages_idx_old;
    old := NULL;
  END IF;
  IF current IS NULL THEN
    RETURN;
  ELSIF NOT (SELECT indisvalid FROM pg_index WHERE indexrelid = current) THEN
    DROP INDEX @extschema@.subagent_context_recent_messages_idx;
  ELSIF obj_description(current, 'pg_class') IS DISTINCT FROM 'subagent-context: prefilter b3f9b0791b74' THEN
    IF old IS NOT NULL THEN
      DROP INDEX @extschema@.subagent_context_recent_messages_idx_old;
    END IF;
    ALTER INDEX @extschema@.subagent_context_recent_messages_idx RENAME TO subagent_context_recent_messages_idx_old;
  END IF;
END
$prepare$;
-- statement
CREATE INDEX CONCURRENTLY IF NOT EXISTS subagent_context_recent_messages_idx
  ON @extschema@.task_session_messages (created_at) WHERE strpos(metadata, 'subagent_task') > 0;
-- statement
COMMENT ON INDEX @extschema@.subagent_context_recent_messages_idx IS 'subagent-context: prefilter b3f9b0791b74';
-- statement
DROP INDEX CONCURRENTLY IF EXISTS @extschema@.subagent_context_recent_messages_idx_old;
