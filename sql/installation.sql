-- subagent_context_installation() (public interface): what the code layer installed here. The last file
-- of the code layer (sql/loader.js), so it is only there when everything before it is.
--   version       the package version (@version@ is filled in by the loader)
--   code_digest   a digest of the code layer's files: `up` re-applies them when it differs
--   server_major  the PostgreSQL major they were built for (parse.sql differs by major): after a major
--                 upgrade of the server, `subagent-context up` re-applies them
DO $installation$
BEGIN
  EXECUTE format(
    $fn$CREATE FUNCTION %s.subagent_context_installation(
           OUT version text, OUT code_digest text, OUT server_major integer)
         LANGUAGE sql IMMUTABLE PARALLEL SAFE
         AS $body$ SELECT %L::text, %L::text, %s::integer $body$$fn$,
    '@extschema@', '@version@', '@digest@', current_setting('server_version_num')::int / 10000);
END
$installation$;
