-- subagent_parse_metadata(text) -> jsonb, or NULL when the text is not JSON that jsonb can hold.
-- Internal, though operators may use it in their own queries over messages (docs/health.md).
-- For set-based paths (backfill, health, repair), which cannot catch an error per row. The capture
-- trigger parses inside its own EXCEPTION block instead and does not use this.
--
-- PostgreSQL 16+ can test input without raising (pg_input_is_valid), which keeps this an inlinable SQL
-- function. PostgreSQL 15 cannot, so there it is a plpgsql function that catches the parse error (a
-- subtransaction that writes nothing, so it takes no subtransaction id). Both paths run in CI.
--
-- Two errors are not soft input errors even on 16+, and pg_input_is_valid raises them: deeply nested
-- JSON ('[[[[…' tens of thousands deep) exhausts the stack ("stack depth limit exceeded"), and a
-- document past jsonb's size limits ("total size of jsonb object elements exceeds the maximum of
-- 268435455 bytes"; a short number takes up to six times its text in jsonb, so 16 MB of text can
-- already come near). One such message would make health, backfill and repair fail. So text with many
-- '[' and '{', and text over 16 MB, go through the catching plpgsql parser; everything else stays inlined.
--
-- PARALLEL UNSAFE, all of them: an EXCEPTION block opens a subtransaction, which PostgreSQL refuses
-- inside a parallel query ("cannot start subtransactions during a parallel operation"). Declared
-- unsafe, a query over them (an operator's, a dashboard's) is simply never planned in parallel.

CREATE FUNCTION @extschema@.subagent_parse_metadata_guarded(metadata text)
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
      CREATE FUNCTION @extschema@.subagent_parse_metadata(metadata text)
      RETURNS jsonb LANGUAGE sql STABLE PARALLEL UNSAFE
      AS $body$
        SELECT CASE
                 WHEN octet_length(metadata) > 16777216
                   OR length(metadata) - length(translate(metadata, '[{', '')) > 256
                   THEN @extschema@.subagent_parse_metadata_guarded(metadata)
                 WHEN pg_input_is_valid(metadata, 'jsonb') THEN metadata::jsonb
               END
      $body$
    $fn$;
  ELSE
    -- PostgreSQL 15: no way to test input without raising, so every parse is the catching one.
    EXECUTE $fn$
      CREATE FUNCTION @extschema@.subagent_parse_metadata(metadata text)
      RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL UNSAFE
      AS $body$ SELECT @extschema@.subagent_parse_metadata_guarded(metadata) $body$
    $fn$;
  END IF;
END
$parse$;
