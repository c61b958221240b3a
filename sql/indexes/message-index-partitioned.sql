-- Health's index on task_session_messages when kandev partitions that table (data layer; internal;
-- docs/partitioning.md). PostgreSQL refuses CREATE INDEX CONCURRENTLY on a partitioned table, and a plain
-- CREATE INDEX would hold every writer for a whole scan, so: the index ON ONLY the parent (catalog only,
-- invalid until complete), each leaf's built CONCURRENTLY, then each attached; partitions created or
-- attached later get it from PostgreSQL. A run interrupted anywhere is completed by the next one. The
-- definition and comment are indexes/message-index.sql's (HEALTH_INDEX in sql/loader.js). The statements are
-- separated by `-- statement` and run one at a time outside a transaction; the second is a query whose rows
-- are the builds that run between the first and the third. The steps that take a lock writers wait for
-- hold it only for a catalog change, and wait for it at most 5 s: a rerun continues.

-- Step 1: the parent index, ON ONLY. One built by an earlier release with another definition (another
-- comment) is set aside, to be dropped once its replacement is complete.
DO $prepare$
BEGIN
  PERFORM set_config('lock_timeout', '5s', true);
  IF obj_description(to_regclass('@extschema@.subagent_context_recent_messages_idx'), 'pg_class')
       IS DISTINCT FROM 'subagent-context: prefilter b3f9b0791b74'
     AND to_regclass('@extschema@.subagent_context_recent_messages_idx') IS NOT NULL THEN
    DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx_old;
    ALTER INDEX @extschema@.subagent_context_recent_messages_idx RENAME TO subagent_context_recent_messages_idx_old;
  END IF;
  IF to_regclass('@extschema@.subagent_context_recent_messages_idx') IS NULL THEN
    CREATE INDEX subagent_context_recent_messages_idx ON ONLY @extschema@.task_session_messages (created_at) WHERE strpos(metadata, 'subagent_task') > 0;
    COMMENT ON INDEX @extschema@.subagent_context_recent_messages_idx IS 'subagent-context: prefilter b3f9b0791b74';
  END IF;
EXCEPTION WHEN lock_not_available THEN
  RAISE EXCEPTION 'subagent-context: could not lock task_session_messages within 5 s to create health''s index on it (a long transaction holds it); nothing was changed and no writer was held; run `subagent-context up` again'
    USING ERRCODE = 'lock_not_available';
END
$prepare$;
-- statement
-- Step 2 (a query, run by the activation when it plans, before step 1 runs): for every leaf partition whose index is missing, the statements that build
-- it, concurrently: first DROP INDEX CONCURRENTLY of a cancelled build (an INVALID index of the
-- installed parent index's definition that is not attached), then CREATE INDEX CONCURRENTLY
-- (PostgreSQL names it). A leaf that already has an index of the current definition, attached or valid
-- and waiting to be attached, needs nothing. Definitions are compared as pg_get_indexdef prints them
-- after USING; when the parent index is missing or an earlier release's (step 1 replaces it), every
-- leaf gets a new one.
WITH installed AS (  -- the parent index, of whichever release
  SELECT regexp_replace(pg_get_indexdef(i.oid), '^.* USING ', '') AS definition,
         obj_description(i.oid, 'pg_class') = 'subagent-context: prefilter b3f9b0791b74' AS current
    FROM pg_class AS i
   WHERE i.oid = to_regclass('@extschema@.subagent_context_recent_messages_idx')
), leaf AS (
  SELECT t.relid AS rel FROM pg_partition_tree('@extschema@.task_session_messages'::regclass) AS t
    JOIN pg_class AS c ON c.oid = t.relid
   WHERE t.isleaf AND c.relkind = 'r'
), candidate AS (  -- indexes of the installed parent's definition on a leaf
  SELECT l.rel, x.indexrelid AS index, x.indisvalid AS valid, p.current,
         EXISTS (SELECT 1 FROM pg_inherits AS h WHERE h.inhrelid = x.indexrelid) AS attached
    FROM leaf AS l JOIN pg_index AS x ON x.indrelid = l.rel, installed AS p
   WHERE regexp_replace(pg_get_indexdef(x.indexrelid), '^.* USING ', '') = p.definition
)
SELECT s.statement FROM (
  SELECT 1 AS step, c.rel, format('DROP INDEX CONCURRENTLY IF EXISTS %s', c.index::regclass) AS statement
    FROM candidate AS c WHERE NOT c.valid AND NOT c.attached
  UNION ALL
  SELECT 2, l.rel, format('CREATE INDEX CONCURRENTLY ON %s %s', l.rel::regclass, '(created_at) WHERE strpos(metadata, ''subagent_task'') > 0')
    FROM leaf AS l
   WHERE NOT EXISTS (SELECT 1 FROM candidate AS c WHERE c.rel = l.rel AND c.current AND (c.valid OR c.attached))
) AS s
ORDER BY s.rel, s.step;
-- statement
-- Step 3: attach. Every partitioned table below the root (sub-partitioning) gets its own ON ONLY index,
-- attached to its parent's, top down; then every leaf's valid index of this definition is attached to
-- its parent's. PostgreSQL marks each partitioned index valid once all its partitions' are attached.
DO $attach$
DECLARE
  definition text := regexp_replace(pg_get_indexdef('@extschema@.subagent_context_recent_messages_idx'::regclass), '^.* USING ', '');
  part record;
  mine regclass;
  above regclass;
BEGIN
  PERFORM set_config('lock_timeout', '5s', true);
  FOR part IN
    SELECT t.relid, t.parentrelid, t.isleaf, c.relkind
      FROM pg_partition_tree('@extschema@.task_session_messages'::regclass) AS t
      JOIN pg_class AS c ON c.oid = t.relid
     WHERE t.level > 0 AND c.relkind IN ('r', 'p')
     ORDER BY t.level, c.relkind DESC  -- partitioned ('p') before leaves ('r') of the same level
  LOOP
    -- This definition's index on the partition's parent (for the root: the index of step 1).
    SELECT x.indexrelid INTO above FROM pg_index AS x
     WHERE x.indrelid = part.parentrelid
       AND regexp_replace(pg_get_indexdef(x.indexrelid), '^.* USING ', '') = definition
     ORDER BY x.indexrelid = '@extschema@.subagent_context_recent_messages_idx'::regclass DESC LIMIT 1;
    -- The partition's own, preferring one already attached there.
    SELECT x.indexrelid INTO mine FROM pg_index AS x
      LEFT JOIN pg_inherits AS h ON h.inhrelid = x.indexrelid
     WHERE x.indrelid = part.relid AND (x.indisvalid OR part.relkind = 'p')
       AND (h.inhparent IS NULL OR h.inhparent = above)
       AND regexp_replace(pg_get_indexdef(x.indexrelid), '^.* USING ', '') = definition
     ORDER BY h.inhparent = above DESC NULLS LAST LIMIT 1;
    IF mine IS NULL AND part.relkind = 'p' THEN
      EXECUTE format('CREATE INDEX ON ONLY %s USING %s', part.relid::regclass, definition);
      SELECT x.indexrelid INTO mine FROM pg_index AS x
       WHERE x.indrelid = part.relid
         AND regexp_replace(pg_get_indexdef(x.indexrelid), '^.* USING ', '') = definition;
    END IF;
    IF mine IS NOT NULL AND above IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_inherits AS h WHERE h.inhrelid = mine AND h.inhparent = above) THEN
      EXECUTE format('ALTER INDEX %s ATTACH PARTITION %s', above, mine);
    END IF;
  END LOOP;
EXCEPTION WHEN lock_not_available THEN
  RAISE EXCEPTION 'subagent-context: could not lock a partition of task_session_messages within 5 s to attach health''s index (a long transaction holds it); no writer was held; run `subagent-context up` again'
    USING ERRCODE = 'lock_not_available';
END
$attach$;
-- statement
-- Step 4: an earlier release's index, once its replacement is complete. A partitioned index cannot be
-- dropped concurrently; dropping it is a catalog change (and unlinking its files) under a short lock.
DO $finish$
BEGIN
  PERFORM set_config('lock_timeout', '5s', true);
  IF (SELECT x.indisvalid FROM pg_index AS x
       WHERE x.indexrelid = '@extschema@.subagent_context_recent_messages_idx'::regclass) THEN
    DROP INDEX IF EXISTS @extschema@.subagent_context_recent_messages_idx_old;
  END IF;
EXCEPTION WHEN lock_not_available THEN
  RAISE WARNING 'subagent-context: could not lock task_session_messages within 5 s to drop the previous release''s index subagent_context_recent_messages_idx_old; it is unused, and the next `subagent-context up` drops it';
END
$finish$;
