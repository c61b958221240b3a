-- The shape of task_session_subagents, whoever created it (data/table.sql, an earlier release, kandev >= 0.89):
-- the columns and the unique key capture needs, the mark of who created it, the indexes and grants of this
-- release. Data layer. A table of another shape stops the installation with an error naming every
-- difference; it aborts the transaction, so nothing is changed. After guards/lock-host.sql, which holds
-- kandev's tables: widening a column takes the table whole, and an index locks it against capture's writes.
DO $shape$
DECLARE
  target regclass := '@extschema@.task_session_subagents'::regclass;
  problems text[];
  widen text[];
  key_immediate boolean;
  ours constant text := 'subagent-context: created by subagent-context';
BEGIN
  -- The columns as data/table.sql declares them (test/table-shape.test.ts holds the two lists together); a type
  -- is compared without its modifier, so timestamp(6) and timestamp both pass.
  WITH expected (pos, name, type, not_null) AS (VALUES
         ( 1, 'id',                  'text',                        true),
         ( 2, 'task_session_id',     'text',                        true),
         ( 3, 'task_id',             'text',                        true),
         ( 4, 'turn_id',             'text',                        false),
         ( 5, 'tool_call_id',        'text',                        true),
         ( 6, 'agent_execution_id',  'text',                        true),
         ( 7, 'parent_tool_call_id', 'text',                        false),
         ( 8, 'subagent_type',       'text',                        false),
         ( 9, 'description',         'text',                        false),
         (10, 'agent_id',            'text',                        false),
         (11, 'child_session_id',    'text',                        false),
         (12, 'model',               'text',                        false),
         (13, 'agent_status',        'text',                        false),
         (14, 'tool_status',         'text',                        false),
         (15, 'is_async',            'integer',                     true),
         (16, 'total_tokens',        'bigint',                      false),
         (17, 'tool_use_count',      'bigint',                      false),
         (18, 'duration_ms',         'bigint',                      false),
         (19, 'source',              'text',                        true),
         (20, 'observed_at',         'timestamp without time zone', true),
         (21, 'settled_at',          'timestamp without time zone', false),
         (22, 'updated_at',          'timestamp without time zone', true)),
       found AS (
         SELECT e.*, format_type(a.atttypid, NULL) AS found_type, a.attnotnull AS found_not_null
           FROM expected AS e
           LEFT JOIN pg_attribute AS a ON a.attrelid = target AND a.attname = e.name AND a.attnum > 0 AND NOT a.attisdropped)
  SELECT array_agg(v.problem ORDER BY f.pos, v.n) FILTER (WHERE v.problem IS NOT NULL),
         array_agg(f.name ORDER BY f.pos) FILTER (WHERE v.n = 1 AND f.found_type = 'integer' AND f.type = 'bigint')  -- kandev >= 0.89's metrics
    INTO problems, widen
    FROM found AS f
   CROSS JOIN LATERAL (VALUES
           (1, CASE WHEN f.found_type IS NULL THEN format('column %s is missing', f.name) END),
           (2, CASE WHEN f.found_type <> f.type AND NOT (f.found_type = 'integer' AND f.type = 'bigint')
                    THEN format('column %s is %s, expected %s', f.name, f.found_type, f.type) END),
           -- Checked for widened columns too: a NOT NULL metric would make every frame without it fail.
           (3, CASE WHEN f.found_not_null <> f.not_null
                    THEN format('column %s is %s, expected %s', f.name,
                                CASE WHEN f.found_not_null THEN 'NOT NULL' ELSE 'nullable' END,
                                CASE WHEN f.not_null THEN 'NOT NULL' ELSE 'nullable' END) END)) AS v(n, problem);

  -- The key ON CONFLICT can use: unique, whole-table, plain columns in this order (INCLUDE columns
  -- allowed), and not deferrable (ON CONFLICT refuses deferrable arbiters, so every capture would fail).
  SELECT bool_or(i.indimmediate) INTO key_immediate
    FROM pg_index AS i
   WHERE i.indrelid = target AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnkeyatts = 3
     AND (SELECT array_agg(a.attname::text ORDER BY k.ord)
            FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute AS a ON a.attrelid = target AND a.attnum = k.attnum
           WHERE k.ord <= 3) = ARRAY['task_session_id', 'agent_execution_id', 'tool_call_id'];
  IF key_immediate IS NULL THEN
    problems := coalesce(problems, '{}') || 'unique key (task_session_id, agent_execution_id, tool_call_id) is missing'::text;
  ELSIF NOT key_immediate THEN
    problems := coalesce(problems, '{}') || 'unique key (task_session_id, agent_execution_id, tool_call_id) is DEFERRABLE, ON CONFLICT cannot use it'::text;
  END IF;

  IF cardinality(problems) > 0 THEN
    -- The differences go in the message itself: clients show the message, not always the DETAIL.
    RAISE EXCEPTION 'subagent-context: existing table %.task_session_subagents has a different shape: %; nothing was changed',
      '@extschema@', array_to_string(problems, '; ')
      USING HINT = 'Rename or drop that table, or give it the columns and unique key listed in docs/integration.md, then install again.',
            ERRCODE = 'object_not_in_prerequisite_state';
  END IF;

  -- Who created it is recorded in its comment: uninstall --drop-data drops only a table of ours. data/table.sql's
  -- table (now, or by 0.1.0, which wrote no comment) is recognised by what only it does: fillfactor 90, the
  -- key's name, and no default execution id (kandev's own table has DEFAULT 'unknown').
  IF obj_description(target, 'pg_class') IS NULL
     AND (SELECT c.reloptions @> ARRAY['fillfactor=90'] FROM pg_class AS c WHERE c.oid = target)
     AND EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = target AND conname = 'task_session_subagents_key')
     AND NOT EXISTS (SELECT 1 FROM pg_attrdef AS d JOIN pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
                      WHERE d.adrelid = target AND a.attname = 'agent_execution_id') THEN
    EXECUTE format('COMMENT ON TABLE %s IS %L', target, ours);
  END IF;

  IF cardinality(widen) > 0 THEN
    EXECUTE format('ALTER TABLE %s %s', target,
      (SELECT string_agg(format('ALTER COLUMN %I TYPE bigint', c), ', ') FROM unnest(widen) AS c));
    RAISE NOTICE 'subagent-context: adopted the existing task_session_subagents; widened % from integer to bigint',
      array_to_string(widen, ', ');
  ELSIF obj_description(target, 'pg_class') IS DISTINCT FROM ours THEN
    RAISE NOTICE 'subagent-context: adopted the existing task_session_subagents unchanged';
  END IF;
END
$shape$;

-- The indexes, each created when missing: CREATE INDEX IF NOT EXISTS would lock the table (SHARE) before it
-- looks, and kandev >= 0.89 writes its own rows here directly.
DO $indexes$
DECLARE
  i record;
BEGIN
  FOR i IN SELECT v.name, v.definition
             FROM (VALUES
                    -- The unique key leads with task_session_id, so it serves lookups by session; these cover the rest.
                    ('task_session_subagents_task_idx', '(task_id)'),
                    ('task_session_subagents_turn_idx', '(turn_id)'),
                    -- Health and the reconciliation read the rows observed in a window of time.
                    ('task_session_subagents_observed_idx', '(observed_at, task_session_id, tool_call_id)'),
                    -- The rows of a known execution (not 'unknown'): usually none. Health's collision count reads
                    -- only these, and a lookup of a (session, tool call) under any execution id is this index plus
                    -- the unique key's entry under 'unknown', never a walk over the session's rows.
                    ('task_session_subagents_known_execution_idx',
                     '(task_session_id, tool_call_id) WHERE agent_execution_id <> ''unknown''')) AS v(name, definition)
            WHERE pg_catalog.to_regclass(pg_catalog.format('%s.%I', '@extschema@', v.name)) IS NULL LOOP
    -- The table as an argument, never inside the format string: a schema name may hold a %.
    EXECUTE pg_catalog.format('CREATE INDEX %I ON %s %s', i.name, '@extschema@.task_session_subagents'::regclass, i.definition);
  END LOOP;
END
$indexes$;

-- Only the capture function (its owner) writes here; writers of messages need no privilege on it.
REVOKE ALL ON @extschema@.task_session_subagents FROM PUBLIC;
