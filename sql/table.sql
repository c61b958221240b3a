-- task_session_subagents (public interface): one row per subagent invocation. Data layer: applied on
-- install and again on every upgrade, so it must leave an existing table as this release wants it.
-- Creates the table, or adopts an existing one: an identical table as it is, kandev >= 0.89's own table
-- after widening its integer metrics to bigint. Any other shape stops the installation with an error that
-- names the difference; the error aborts the migration's transaction, so nothing is changed.
--
-- Who created the table is recorded in its comment: uninstall --drop-data (uninstall-data.sql) drops
-- only a table this project created, never kandev's own.

DO $install$
DECLARE
  target regclass := to_regclass('@extschema@.task_session_subagents');
  -- The one definition of the table's columns: it creates the table, and an existing table is held
  -- against it. The type is compared without its modifier (timestamp(6) and timestamp both pass).
  columns constant text[][] := ARRAY[
    -- column                type            constraints
    ['id',                  'text',         'PRIMARY KEY'],
    ['task_session_id',     'text',         'NOT NULL REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE'],
    ['task_id',             'text',         'NOT NULL'],
    ['turn_id',             'text',         ''],          -- no FK: the record outlives its turn
    ['tool_call_id',        'text',         'NOT NULL'],
    ['agent_execution_id',  'text',         'NOT NULL'],  -- no FK; 'unknown' when the host does not say
    ['parent_tool_call_id', 'text',         ''],
    ['subagent_type',       'text',         ''],
    ['description',         'text',         ''],
    ['agent_id',            'text',         ''],
    ['child_session_id',    'text',         ''],
    ['model',               'text',         ''],
    ['agent_status',        'text',         ''],
    ['tool_status',         'text',         ''],
    ['is_async',            'integer',      'NOT NULL DEFAULT 0'],
    ['total_tokens',        'bigint',       ''],          -- NULL = not reported, never 0 by default
    ['tool_use_count',      'bigint',       ''],
    ['duration_ms',         'bigint',       ''],
    ['source',              'text',         $$NOT NULL DEFAULT 'live'$$],
    ['observed_at',         'timestamp(6)', 'NOT NULL'],
    ['settled_at',          'timestamp(6)', ''],
    ['updated_at',          'timestamp(6)', 'NOT NULL']];
  col text[];
  definition text := '';
  expected_type text;
  expected_notnull boolean;
  found_type text;
  found_notnull boolean;
  problems text[] := '{}';
  widen text[] := '{}';
  key_immediate boolean;
BEGIN
  IF target IS NULL THEN
    FOREACH col SLICE 1 IN ARRAY columns LOOP
      definition := definition || format('%I %s %s, ', col[1], col[2], col[3]);
    END LOOP;
    EXECUTE format('CREATE TABLE %s.task_session_subagents (%s'
                   'CONSTRAINT task_session_subagents_key UNIQUE (task_session_id, agent_execution_id, tool_call_id)'
                   ') WITH (fillfactor = 90)',  -- room on the page keeps the frequent merge updates HOT
                   '@extschema@', definition);
    COMMENT ON TABLE @extschema@.task_session_subagents IS 'subagent-context: created by subagent-context';
    RETURN;
  END IF;

  FOREACH col SLICE 1 IN ARRAY columns LOOP
    expected_type := format_type(col[2]::regtype, NULL);
    expected_notnull := col[3] ~ '^(NOT NULL|PRIMARY KEY)';
    SELECT format_type(a.atttypid, NULL), a.attnotnull INTO found_type, found_notnull
      FROM pg_attribute a
     WHERE a.attrelid = target AND a.attname = col[1] AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
      problems := problems || format('column %s is missing', col[1]);
      CONTINUE;
    ELSIF found_type = 'integer' AND expected_type = 'bigint' THEN
      widen := widen || col[1];          -- kandev >= 0.89 declares the metrics as integer
    ELSIF found_type <> expected_type THEN
      problems := problems || format('column %s is %s, expected %s', col[1], found_type, expected_type);
    END IF;
    -- Checked for widened columns too: a NOT NULL metric would make every frame without it fail.
    IF found_notnull <> expected_notnull THEN
      problems := problems || format('column %s is %s, expected %s', col[1],
        CASE WHEN found_notnull THEN 'NOT NULL' ELSE 'nullable' END,
        CASE WHEN expected_notnull THEN 'NOT NULL' ELSE 'nullable' END);
    END IF;
  END LOOP;

  -- The key ON CONFLICT can use: unique, whole-table, plain columns in this order (INCLUDE columns
  -- allowed), and not deferrable (ON CONFLICT refuses deferrable arbiters, so every capture would fail).
  SELECT bool_or(i.indimmediate) INTO key_immediate
    FROM pg_index i
   WHERE i.indrelid = target AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
     AND i.indnkeyatts = 3
     AND (SELECT array_agg(a.attname::text ORDER BY k.ord)
            FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = target AND a.attnum = k.attnum
           WHERE k.ord <= 3)
         = ARRAY['task_session_id', 'agent_execution_id', 'tool_call_id'];
  IF key_immediate IS NULL THEN
    problems := problems || 'unique key (task_session_id, agent_execution_id, tool_call_id) is missing'::text;
  ELSIF NOT key_immediate THEN
    problems := problems || 'unique key (task_session_id, agent_execution_id, tool_call_id) is DEFERRABLE, ON CONFLICT cannot use it'::text;
  END IF;

  IF cardinality(problems) > 0 THEN
    -- The differences go in the message itself: clients (the CLI, node-pg-migrate) show the message,
    -- not always the DETAIL.
    RAISE EXCEPTION 'subagent-context: existing table %.task_session_subagents has a different shape: %; nothing was changed',
      '@extschema@', array_to_string(problems, '; ')
      USING HINT = 'Rename or drop that table, or give it the columns and unique key listed in docs/integration.md, then install again.',
            ERRCODE = 'object_not_in_prerequisite_state';
  END IF;

  -- 0.1.0 created its table without the comment. It is recognised by what only it did (fillfactor 90,
  -- the key's name, no default execution id: kandev's own table has DEFAULT 'unknown').
  IF obj_description(target, 'pg_class') IS NULL
     AND (SELECT c.reloptions @> ARRAY['fillfactor=90'] FROM pg_class AS c WHERE c.oid = target)
     AND EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = target AND conname = 'task_session_subagents_key')
     AND NOT EXISTS (SELECT 1 FROM pg_attrdef AS d JOIN pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
                      WHERE d.adrelid = target AND a.attname = 'agent_execution_id') THEN
    COMMENT ON TABLE @extschema@.task_session_subagents IS 'subagent-context: created by subagent-context';
  END IF;

  IF cardinality(widen) > 0 THEN
    EXECUTE format('ALTER TABLE %s.task_session_subagents %s', '@extschema@',
      (SELECT string_agg(format('ALTER COLUMN %I TYPE bigint', c), ', ') FROM unnest(widen) AS c));
    RAISE NOTICE 'subagent-context: adopted the existing task_session_subagents; widened % from integer to bigint',
      array_to_string(widen, ', ');
  ELSIF obj_description(target, 'pg_class') IS DISTINCT FROM 'subagent-context: created by subagent-context' THEN
    RAISE NOTICE 'subagent-context: adopted the existing task_session_subagents unchanged';
  END IF;
END
$install$;

-- The unique key leads with task_session_id, so it serves lookups by session; these cover the rest.
CREATE INDEX IF NOT EXISTS task_session_subagents_task_idx ON @extschema@.task_session_subagents (task_id);
CREATE INDEX IF NOT EXISTS task_session_subagents_turn_idx ON @extschema@.task_session_subagents (turn_id);
-- Health compares rows observed since activation; this keeps the recent window cheap.
CREATE INDEX IF NOT EXISTS task_session_subagents_observed_idx
  ON @extschema@.task_session_subagents (observed_at, task_session_id, tool_call_id);

-- Health's collision count starts from the rows of a known execution (not 'unknown'): usually none,
-- so the count costs nothing instead of grouping the whole table. Writes pay one predicate check.
CREATE INDEX IF NOT EXISTS task_session_subagents_known_execution_idx
  ON @extschema@.task_session_subagents (task_session_id, tool_call_id)
  WHERE agent_execution_id <> 'unknown';

-- Health's index on task_session_messages is built by message-index.sql, without blocking writers.

-- Only the capture function (its owner) writes here; writers of messages need no privilege on it.
REVOKE ALL ON @extschema@.task_session_subagents FROM PUBLIC;
