-- The one index this product adds to kandev's own table, built CONCURRENTLY: message writers go on
-- while it is built (a plain CREATE INDEX would hold their writes for a whole scan of the table).
-- CONCURRENTLY cannot run in a transaction block, so the activation migration (outside the install
-- transaction) runs the statements of this file one at a time; they are separated by `-- statement`.
-- A build interrupted earlier leaves an INVALID index that IF NOT EXISTS would keep: drop it first.
DO $drop_invalid$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_index
              WHERE indexrelid = to_regclass('@extschema@.subagent_context_recent_messages_idx')
                AND NOT indisvalid) THEN
    DROP INDEX @extschema@.subagent_context_recent_messages_idx;
  END IF;
END
$drop_invalid$;
-- statement
-- Health's recent window reads the messages that may qualify, created since capture_since. A partial
-- index on the host table: its predicate is the capture prefilter (subagent_may_qualify, derive.sql,
-- written out so the index does not depend on a function), so only messages that mention subagent_task get
-- an entry. Cost on writes: other messages pay two strpos calls per INSERT and per non-HOT UPDATE;
-- subagent frames pay one btree insert per new row version. Because the predicate reads metadata, an
-- UPDATE that changes metadata is no longer HOT on hosts without kandev's metadata expression index
-- (on kandev it already was not). BENCHMARKS.md has the measured cost.
CREATE INDEX CONCURRENTLY IF NOT EXISTS subagent_context_recent_messages_idx
  ON @extschema@.task_session_messages (created_at)
  WHERE strpos(metadata, 'subagent_task') > 0 OR strpos(metadata, E'\\u') > 0;
