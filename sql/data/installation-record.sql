-- What the code layer installed here (data layer; internal): one row, written with the code layer
-- (subagent_context_record_installation()) and read by subagent_context_installation().
CREATE TABLE IF NOT EXISTS @extschema@.subagent_context_installed (
  singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version      text NOT NULL,              -- the package version
  code_digest  text NOT NULL,              -- a digest of the code layer's files: `up` re-applies them when it differs
  server_major integer NOT NULL,           -- the PostgreSQL major they were built for (code/parse.sql differs by major)
  installed_at timestamp(6) NOT NULL
);
REVOKE ALL ON @extschema@.subagent_context_installed FROM PUBLIC;
