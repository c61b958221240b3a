-- Activation keys in kandev_meta (docs/health.md#activation-keys): UTC, RFC 3339 with a T, nine fraction
-- digits and Z. Internal helpers to write, read and parse them; keys are always compared as timestamps
-- (microseconds), never as strings.

CREATE FUNCTION @extschema@.subagent_context_format_key(t timestamp)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"') $$;

-- A stored key as a UTC timestamp, or NULL when absent, '' or unreadable. A value without an explicit
-- zone is read as UTC: TimeZone is pinned here so the caller's session time zone never matters.
CREATE FUNCTION @extschema@.subagent_context_parse_key(value text)
RETURNS timestamp LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
BEGIN
  IF nullif(btrim(value), '') IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN value::timestamptz AT TIME ZONE 'UTC';
EXCEPTION WHEN OTHERS THEN
  RETURN NULL;
END
$$;

-- A key's stored text, or NULL when absent. PL/pgSQL: Citus plans no distributed query inside a
-- parameterized SQL function, and kandev_meta is a reference table there.
CREATE FUNCTION @extschema@.subagent_context_key(name text)
RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN (SELECT m.value FROM @extschema@.kandev_meta AS m WHERE m.key = name);
END
$$;

-- When capture was activated (the capture_since key, parsed), or NULL: not activated.
CREATE FUNCTION @extschema@.subagent_context_capture_since()
RETURNS timestamp LANGUAGE sql STABLE
AS $$ SELECT @extschema@.subagent_context_parse_key(@extschema@.subagent_context_key('subagent_context_capture_since')) $$;
