-- Derivation: message row -> task_session_subagents values (docs/decisions.md#derivation).
-- Internal, all of it: the functions and the row type subagent_context_row are the shared middle of capture,
-- backfill and repair, not an interface; an upgrade replaces them.
--
-- Pure functions, shared by the capture trigger, the backfill and the repair, so that live capture and
-- history can never disagree. Every per-row helper is a one-expression LANGUAGE sql function with no SET
-- clause, so the planner inlines it into the caller's statement (a SET clause would block inlining).
-- Callers pin search_path; that is why the bodies may name built-ins unqualified.

-- The prefilter: can this metadata qualify at all? One pass for the literal subagent_task, which is part of
-- what qualifies (docs/decisions.md#derivation): a document that spells the kind with \u escapes is not a
-- subagent call on any path. The same expression (MAY_QUALIFY in sql/loader.js) is the trigger's WHEN
-- clause (code/capture.sql) and the predicate of health's index on task_session_messages (indexes/message-index.sql);
-- every other path calls this function, which inlines to it and so matches that index.
CREATE FUNCTION @extschema@.subagent_context_may_qualify(metadata text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT strpos(metadata, 'subagent_task') > 0 $$;

-- Does a parsed metadata document describe a subagent call?
CREATE FUNCTION @extschema@.subagent_context_qualifies(doc jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(doc -> 'normalized' ->> 'kind' = 'subagent_task', false) $$;

-- A text field of an object: a non-empty JSON string, else NULL ('' -> NULL; numbers, objects ...
-- -> NULL). Read in place (obj ->> field), not copied out first: each operator in the capture path is
-- compiled again on every message write (per statement and per transaction), so the count matters.
CREATE FUNCTION @extschema@.subagent_context_text_field(obj jsonb, field text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN jsonb_typeof(obj -> field) = 'string' THEN nullif(obj ->> field, '') END $$;

-- A count: a JSON integer in [0, bigint max], else NULL. Strings, fractions (1.5, 2.0), booleans,
-- objects and out-of-range numbers (1e30) are not counts. jsonb stores 1e2 as 100, so it counts.
CREATE FUNCTION @extschema@.subagent_context_count(v jsonb)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT CASE WHEN jsonb_typeof(v) = 'number'
               AND scale(v::numeric) = 0
               AND v::numeric <@ numrange(0, 9223372036854775807, '[]')  -- folded to one constant
              THEN v::numeric::bigint END
$$;

-- Reported but unusable: present, not JSON null, and not a count (negative, malformed, too big).
CREATE FUNCTION @extschema@.subagent_context_metric_is_anomalous(v jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(jsonb_typeof(v) <> 'null', false) AND @extschema@.subagent_context_count(v) IS NULL $$;

CREATE FUNCTION @extschema@.subagent_context_has_anomaly(doc jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT @extschema@.subagent_context_metric_is_anomalous(doc #> '{normalized,subagent_task,total_tokens}')
      OR @extschema@.subagent_context_metric_is_anomalous(doc #> '{normalized,subagent_task,tool_use_count}')
      OR @extschema@.subagent_context_metric_is_anomalous(doc #> '{normalized,subagent_task,duration_ms}')
$$;

-- The terminal ACP tool-call statuses: exact and case-sensitive. The one owner of this set; a test
-- pins it to the TypeScript constant TERMINAL_TOOL_STATUSES.
CREATE FUNCTION @extschema@.subagent_context_is_terminal_status(tool_status text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(tool_status IN ('complete', 'completed', 'success', 'error', 'failed', 'cancelled'), false) $$;

-- is_async: JSON true, 1 or "true" -> 1; anything else -> 0.
CREATE FUNCTION @extschema@.subagent_context_flag(v jsonb)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN v::text IN ('true', '1', '"true"') THEN 1 ELSE 0 END $$;

-- Identity complete? session, task and top-level tool_call_id all non-empty.
CREATE FUNCTION @extschema@.subagent_context_has_identity(task_session_id text, task_id text, doc jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT nullif(task_session_id, '') IS NOT NULL
     AND nullif(task_id, '') IS NOT NULL
     AND @extschema@.subagent_context_text_field(doc, 'tool_call_id') IS NOT NULL
$$;

-- Execution identity (docs/integration.md): metadata first, then the transaction-local setting, else 'unknown'.
CREATE FUNCTION @extschema@.subagent_context_execution_id(doc jsonb, setting text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(@extschema@.subagent_context_text_field(doc, 'agent_execution_id'), nullif(setting, ''), 'unknown') $$;

-- The shape of a derived row: the columns of task_session_subagents that derivation decides (id and
-- source are the writer's). Named once so derivation and history share it; the two INSERTs (code/capture.sql,
-- code/history.sql) take it whole (d.*), naming their target columns in this order.
CREATE TYPE @extschema@.subagent_context_row AS (
  task_session_id text, task_id text, turn_id text, tool_call_id text, agent_execution_id text,
  parent_tool_call_id text, subagent_type text, description text, agent_id text,
  child_session_id text, model text, agent_status text, tool_status text, is_async integer,
  total_tokens bigint, tool_use_count bigint, duration_ms bigint,
  observed_at timestamp, settled_at timestamp, updated_at timestamp);

-- The derived row of one message write: one row when the document qualifies and the identity is
-- complete, none otherwise. Times come in already defaulted by the caller (a pure function cannot read
-- the clock); execution_id comes in resolved (the trigger and the history paths resolve it differently).
CREATE FUNCTION @extschema@.subagent_context_derive_row(
  message_session_id text, message_task_id text, message_turn_id text, doc jsonb,
  message_created_at timestamp, message_updated_at timestamp, execution_id text)
RETURNS SETOF @extschema@.subagent_context_row
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT $1, $2, nullif($3, ''),
         @extschema@.subagent_context_text_field($4, 'tool_call_id'),
         $7,
         @extschema@.subagent_context_text_field($4, 'parent_tool_call_id'),
         @extschema@.subagent_context_text_field(st, 'subagent_type'),
         @extschema@.subagent_context_text_field(st, 'description'),
         @extschema@.subagent_context_text_field(st, 'agent_id'),
         @extschema@.subagent_context_text_field(st, 'child_session_id'),
         @extschema@.subagent_context_text_field(st, 'model'),
         @extschema@.subagent_context_text_field(st, 'status'),
         tool_status,
         @extschema@.subagent_context_flag(st -> 'is_async'),
         nullif(@extschema@.subagent_context_count(st -> 'total_tokens'), 0),
         @extschema@.subagent_context_count(st -> 'tool_use_count'),
         nullif(@extschema@.subagent_context_count(st -> 'duration_ms'), 0),
         $5,
         CASE WHEN @extschema@.subagent_context_is_terminal_status(tool_status) THEN $6 END,
         $6
    -- OFFSET 0 keeps this subquery from being flattened: st is extracted once per row instead of
    -- once per use (a dozen copies of the subagent_task object, prompt included), and tool_status,
    -- used twice, is derived once.
    FROM (SELECT $4 #> '{normalized,subagent_task}' AS st,
                 @extschema@.subagent_context_text_field($4, 'status') AS tool_status
          OFFSET 0) AS s
   WHERE @extschema@.subagent_context_qualifies($4)
     AND @extschema@.subagent_context_has_identity($1, $2, $4)
$$;
