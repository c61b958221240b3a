-- The first file of the code layer: drops the code of this and every earlier release, so the files after
-- it create exactly this release's code, whatever was there. Internal.
--
-- Every function and procedure of the installation is named subagent_* or derive_subagent_row, in the
-- target schema; all of them go, whatever their signature, and the row type with them. Kept:
-- capture_subagent_message() and its trigger: code/capture.sql replaces the function in place and re-creates
-- the trigger keeping its ENABLE state (dropping them would drop that state). Data is never touched here.
DO $drop_code$
DECLARE
  f record;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure AS signature, p.prokind
      FROM pg_proc AS p
     WHERE p.pronamespace = '@extschema@'::regnamespace
       AND (p.proname LIKE 'subagent\_%' OR p.proname = 'derive_subagent_row')
  LOOP
    EXECUTE format('DROP %s IF EXISTS %s', CASE WHEN f.prokind = 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, f.signature);
  END LOOP;
END
$drop_code$;
DROP TYPE IF EXISTS @extschema@.subagent_row;
