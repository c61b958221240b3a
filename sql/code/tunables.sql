-- The tunables: each is read here, once, with its default and its bounds (docs/health.md#tuning). An
-- operator may set one per database or role (ALTER DATABASE kandev SET subagent_context.batch_messages =
-- 2000) or per transaction (SET LOCAL); a value out of bounds is refused in one sentence. Internal.

CREATE FUNCTION @extschema@.subagent_context_setting(name text, fallback integer, lowest integer, highest integer)
RETURNS integer LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  given text := nullif(btrim(current_setting('subagent_context.' || name, true)), '');
BEGIN
  IF given IS NULL THEN
    RETURN fallback;
  ELSIF given !~ '^[0-9]{1,9}$' OR given::integer NOT BETWEEN lowest AND highest THEN
    RAISE EXCEPTION 'subagent-context: subagent_context.% must be a whole number from % to %, got "%"',
      name, lowest, highest, left(given, 40) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN given::integer;
END
$$;

-- Messages per step of the backfill, the reconciliation and repair (and missing keys per repair batch):
-- each step is one short transaction, so this bounds how long a step holds a snapshot and how long a live
-- write of a row the step stores waits for its commit.
CREATE FUNCTION @extschema@.subagent_context_batch_messages()
RETURNS integer LANGUAGE sql STABLE
AS $$ SELECT @extschema@.subagent_context_setting('batch_messages', 5000, 1, 50000) $$;

-- Minutes between reconciliations: a new one starts when the newest completed one started longer ago.
CREATE FUNCTION @extschema@.subagent_context_reconcile_every()
RETURNS interval LANGUAGE sql STABLE
AS $$ SELECT make_interval(mins => @extschema@.subagent_context_setting('reconcile_minutes', 60, 1, 10080)) $$;

-- Keys per repair batch (0.5.0): every row a batch stores is held from its insert to the batch's commit, so
-- a live frame of one of them waits that long; a few hundred keys insert and commit well within capture's
-- own 200 ms wait even on a loaded server (docs/reliability.md#repair). On Citus 2,000 by default: each
-- statement of a batch reaches every shard, so its time hardly grows with its keys (a store of 500 took
-- 110-130 ms there, of 2,000 136-140 ms; 500 a batch stored at a fifth of the backfill's rate), and the
-- store inserts its rows only after it has derived them all (Citus repartitions them to their shards), but
-- that insert holds the first shard's rows while the others are inserted: beside 8 writers, batches of
-- 5,000 made 3 captures give up their wait in one of four repairs.
CREATE FUNCTION @extschema@.subagent_context_repair_keys()
RETURNS integer LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN @extschema@.subagent_context_setting('repair_keys',
    CASE WHEN @extschema@.subagent_context_topology() = 'citus' THEN 2000 ELSE 500 END, 1, 50000);
END
$$;

-- The largest message document, in bytes, that capture parses inside kandev's write (0.5.0; default 4 MB,
-- at least 1 MB): a larger one is recorded as a deferred capture that `repair` completes, so kandev's write
-- never pays a parse that grows with what an agent wrote (docs/reliability.md#large-documents). Read by the
-- trigger only for documents over 1 MB, and never refused: a bad value there would have to fail kandev's
-- write or lose the capture, so it means the default.
CREATE FUNCTION @extschema@.subagent_context_capture_max_bytes()
RETURNS bigint LANGUAGE sql STABLE
AS $$
  SELECT CASE WHEN s ~ '^[0-9]{1,10}$' THEN greatest(s::bigint, 1048576) ELSE 4194304 END
    FROM (SELECT btrim(coalesce(current_setting('subagent_context.capture_max_bytes', true), '')) AS s) AS x
$$;
-- Subagent messages one health call compares itself, at most: the newest ones past the reconciliation's
-- frontier (the rest it counts, up to 20 times as many, and reports as `uncompared`); also how many recorded
-- missing keys it checks again. This bounds health's cost in every state (docs/health.md#bounded-in-every-state).
CREATE FUNCTION @extschema@.subagent_context_health_messages()
RETURNS integer LANGUAGE sql STABLE
AS $$ SELECT @extschema@.subagent_context_setting('health_messages', 500, 1, 50000) $$;

-- How close to now the reconciliation compares: a message created just before a step, in a transaction
-- that commits just after it, is left to a later step rather than skipped (not tunable).
CREATE FUNCTION @extschema@.subagent_context_settle()
RETURNS interval LANGUAGE sql IMMUTABLE
AS $$ SELECT interval '1 second' $$;
