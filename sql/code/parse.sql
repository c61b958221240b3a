-- subagent_context_parse_metadata(text) -> jsonb, or NULL when the text is not JSON that jsonb can hold: for the
-- set-based paths (backfill, health, repair), which cannot catch an error per row; capture parses inside its
-- own EXCEPTION block. Operators may use it in their own queries (docs/health.md).
--
-- PostgreSQL 16+ tests input without raising (pg_input_is_valid), so it stays an inlinable SQL function;
-- PostgreSQL 15 catches the error in plpgsql (a subtransaction that writes nothing). Deeply nested JSON
-- (the stack) and documents past jsonb's size limits raise even under pg_input_is_valid, so text with many
-- brackets or over 16 MB takes the catching parser on every major. PARALLEL UNSAFE, all of them: a
-- parallel query refuses the subtransaction of an EXCEPTION block.

CREATE FUNCTION @extschema@.subagent_context_parse_metadata_guarded(metadata text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE
AS $body$
BEGIN
  RETURN metadata::jsonb;
EXCEPTION WHEN OTHERS THEN
  RETURN NULL;
END
$body$;

DO $parse$
BEGIN
  IF current_setting('server_version_num')::int >= 160000 THEN
    EXECUTE $fn$
      CREATE FUNCTION @extschema@.subagent_context_parse_metadata(metadata text)
      RETURNS jsonb LANGUAGE sql STABLE PARALLEL UNSAFE
      AS $body$
        SELECT CASE
                 WHEN octet_length(metadata) > 16777216
                   OR octet_length(metadata) - octet_length(replace(replace(metadata, '[', ''), '{', '')) > 256
                   THEN @extschema@.subagent_context_parse_metadata_guarded(metadata)
                 WHEN pg_input_is_valid(metadata, 'jsonb') THEN metadata::jsonb
               END
      $body$
    $fn$;
  ELSE
    -- PostgreSQL 15: no way to test input without raising, so every parse is the catching one.
    EXECUTE $fn$
      CREATE FUNCTION @extschema@.subagent_context_parse_metadata(metadata text)
      RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL UNSAFE
      AS $body$ SELECT @extschema@.subagent_context_parse_metadata_guarded(metadata) $body$
    $fn$;
  END IF;
END
$parse$;
