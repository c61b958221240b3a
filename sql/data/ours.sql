-- Which functions, procedures and types in the target schema are the installation's: the one rule, read
-- by the code layer's first file (code/drop-code.sql), its grants (code/grants.sql), uninstall and the
-- tests. Internal. In the data layer, so that it is there before drop-code.sql replaces an earlier
-- release's code, and after it: every `up` applies it again, and an uninstall applies it first (the
-- installation of an earlier release has none) and drops it last (uninstall/ours.sql).
--
-- This release names everything it creates subagent_context_*. Releases up to 0.4.0 also named functions
-- subagent_*, derive_subagent_row and capture_subagent_message, and the row type subagent_row: an upgrade
-- or an uninstall must still find those. Types are the standalone ones (a table's row type goes with it).
CREATE OR REPLACE FUNCTION @extschema@.subagent_context_ours()
RETURNS TABLE (kind text, oid oid, name name)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, p.oid, p.proname
    FROM pg_catalog.pg_proc AS p
   WHERE p.pronamespace = '@extschema@'::regnamespace
     AND (p.proname LIKE 'subagent\_%' OR p.proname IN ('derive_subagent_row', 'capture_subagent_message'))
  UNION ALL
  SELECT 'TYPE', t.oid, t.typname
    FROM pg_catalog.pg_type AS t JOIN pg_catalog.pg_class AS c ON c.oid = t.typrelid
   WHERE t.typnamespace = '@extschema@'::regnamespace AND t.typname LIKE 'subagent\_%' AND c.relkind = 'c'
$$;
REVOKE ALL ON FUNCTION @extschema@.subagent_context_ours() FROM PUBLIC;
