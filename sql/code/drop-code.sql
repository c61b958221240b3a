-- The first file of the code layer: drops the code of this and every earlier release, so the files after
-- it create exactly this release's code, whatever was there. Internal.
--
-- Everything data/ours.sql names goes, whatever its signature: functions and procedures first, then the
-- row type they use. Kept: that rule itself, and the capture trigger's function (under its name of any
-- release), because code/capture.sql replaces it in place and code/trigger.sql re-creates the trigger
-- keeping its ENABLE state (dropping them would drop that state). Data is never touched here.
DO $drop_code$
DECLARE
  drops text[];
  d text;
BEGIN
  -- Listed first, dropped after: nothing is dropped while the list is read.
  SELECT pg_catalog.array_agg(pg_catalog.format('DROP %s IF EXISTS %s', o.kind,
           CASE o.kind WHEN 'TYPE' THEN o.oid::regtype::text ELSE o.oid::regprocedure::text END)
           ORDER BY o.kind = 'TYPE', o.oid)
    INTO drops
    FROM @extschema@.subagent_context_ours() AS o
   WHERE o.name NOT IN ('subagent_context_ours', 'subagent_context_capture_message', 'capture_subagent_message');
  FOREACH d IN ARRAY coalesce(drops, '{}') LOOP
    EXECUTE d;
  END LOOP;
END
$drop_code$;
