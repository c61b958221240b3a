-- Activation keys in kandev_meta (docs/health.md#activation-keys): UTC, RFC 3339 with a T, nine fraction
-- digits and Z. Internal helpers to write, read and parse them.
-- They are always compared as timestamps (microseconds), never as strings.

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

CREATE FUNCTION @extschema@.subagent_context_key(name text)
RETURNS text LANGUAGE sql STABLE
AS $$ SELECT value FROM @extschema@.kandev_meta WHERE key = name $$;
