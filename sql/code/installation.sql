-- What the code layer installed here (public interface: subagent_context_installation()), read from the
-- record the loader writes after the code layer (subagent_context_record_installation(); the data is in
-- data/installation-record.sql's table). No row: the code was applied by hand, and `up` applies it again.
CREATE FUNCTION @extschema@.subagent_context_installation(
  OUT version text, OUT code_digest text, OUT server_major integer)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER  -- versions only: readable with USAGE on the schema, like health
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.version, i.code_digest, i.server_major FROM @extschema@.subagent_context_installed AS i $$;

-- Records the package version and code digest (given by the loader) and the server major (code/parse.sql differs
-- by major): after a major upgrade of the server, or with another package's code, `up` re-applies the code.
CREATE FUNCTION @extschema@.subagent_context_record_installation(version text, code_digest text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
  INSERT INTO @extschema@.subagent_context_installed (version, code_digest, server_major, installed_at)
  VALUES (version, code_digest, current_setting('server_version_num')::integer / 10000, clock_timestamp() AT TIME ZONE 'UTC')
  ON CONFLICT (singleton) DO UPDATE
    SET version = EXCLUDED.version, code_digest = EXCLUDED.code_digest, server_major = EXCLUDED.server_major,
        installed_at = EXCLUDED.installed_at
$$;
