-- Refuses, in one sentence, to write or delete the activation keys when kandev_meta carries code another
-- role controls (docs/security.md#kandev_meta). kandev's application role commonly owns kandev_meta: a
-- trigger or rule it puts there, or a default, check, index expression or policy calling a function of its
-- own, runs with the privileges of whoever writes the table, which for us is the installer, often a
-- superuser. Writing as the table's owner (SET ROLE) is no way out: code running under SET ROLE can RESET it.
-- So before each write (backfill's keys, deactivation's DELETE): when the running role is not kandev_meta's
-- owner, anything of the table (and of its partitions or children) that is not built in stops it. The
-- ROW EXCLUSIVE lock, which the write takes anyway, keeps any of that from being added until the write
-- commits (CREATE TRIGGER, CREATE RULE, ALTER TABLE and CREATE INDEX all wait for it). Internal.
-- Code layer, and also applied first by every deactivation (CREATE OR REPLACE): the uninstall of an earlier
-- release's installation, which has no such function, deletes the keys behind it too (sql/loader.js).
CREATE OR REPLACE FUNCTION @extschema@.subagent_context_assert_meta_writable()
RETURNS void LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  meta constant regclass := to_regclass('@extschema@.kandev_meta');
  owner name;
  foreign_code text;
BEGIN
  IF meta IS NULL THEN
    RETURN;  -- nothing to write into: the write says so itself
  END IF;
  LOCK TABLE @extschema@.kandev_meta IN ROW EXCLUSIVE MODE;
  SELECT r.rolname INTO owner FROM pg_class AS c JOIN pg_roles AS r ON r.oid = c.relowner WHERE c.oid = meta;
  IF owner = current_user THEN
    RETURN;  -- its code runs as its owner either way: nothing it could not already do
  END IF;
  WITH RECURSIVE rel(oid) AS (
    SELECT meta::oid
    UNION
    SELECT i.inhrelid FROM pg_inherits AS i JOIN rel ON i.inhparent = rel.oid
  ), found AS (
    SELECT format('%s is a %s, not a table', meta, CASE c.relkind WHEN 'v' THEN 'view' WHEN 'f' THEN 'foreign table' ELSE 'relation of kind ' || c.relkind::text END) AS what
      FROM pg_class AS c WHERE c.oid = meta AND c.relkind NOT IN ('r', 'p')
    UNION ALL
    SELECT format('trigger %I on %s', t.tgname, t.tgrelid::regclass)
      FROM pg_trigger AS t JOIN rel ON t.tgrelid = rel.oid
     WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'
    UNION ALL
    SELECT format('rule %I on %s', w.rulename, w.ev_class::regclass)
      FROM pg_rewrite AS w JOIN rel ON w.ev_class = rel.oid
     WHERE w.rulename <> '_RETURN' AND w.ev_enabled <> 'D'
    UNION ALL
    -- Defaults and generated columns, checks, index expressions and predicates, policies: by what they call.
    SELECT DISTINCT format('%s calling %s',
             CASE d.classid
               WHEN 'pg_attrdef'::regclass THEN 'a column default'
               WHEN 'pg_constraint'::regclass THEN 'a constraint'
               WHEN 'pg_policy'::regclass THEN 'a row security policy'
               ELSE 'an index' END,
             CASE d.refclassid WHEN 'pg_proc'::regclass THEN d.refobjid::regprocedure::text ELSE 'operator ' || d.refobjid::regoperator::text END)
      FROM pg_depend AS d
     WHERE d.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass)
       AND ((d.classid = 'pg_attrdef'::regclass AND d.objid IN (SELECT a.oid FROM pg_attrdef AS a JOIN rel ON a.adrelid = rel.oid))
         OR (d.classid = 'pg_constraint'::regclass AND d.objid IN (SELECT k.oid FROM pg_constraint AS k JOIN rel ON k.conrelid = rel.oid))
         OR (d.classid = 'pg_policy'::regclass AND d.objid IN (SELECT y.oid FROM pg_policy AS y JOIN rel ON y.polrelid = rel.oid))
         OR (d.classid = 'pg_class'::regclass AND d.objid IN (SELECT x.indexrelid FROM pg_index AS x JOIN rel ON x.indrelid = rel.oid)))
       AND CASE d.refclassid
             WHEN 'pg_proc'::regclass THEN (SELECT p.pronamespace FROM pg_proc AS p WHERE p.oid = d.refobjid)
             ELSE (SELECT o.oprnamespace FROM pg_operator AS o WHERE o.oid = d.refobjid) END <> 'pg_catalog'::regnamespace
    UNION ALL
    -- A column of a type of its own (a domain's check, a type's input function) runs its code on a write too.
    SELECT format('column %I of type %s', a.attname, a.atttypid::regtype)
      FROM pg_attribute AS a JOIN rel ON a.attrelid = rel.oid JOIN pg_type AS ty ON ty.oid = a.atttypid
     WHERE a.attnum > 0 AND NOT a.attisdropped AND ty.typnamespace <> 'pg_catalog'::regnamespace
  )
  SELECT string_agg(what, ', ' ORDER BY what) INTO foreign_code FROM found;
  IF foreign_code IS NOT NULL THEN
    RAISE EXCEPTION 'subagent-context: % carries code that its owner % controls (%), which would run with the privileges of %, who is not its owner, when subagent-context writes or deletes its activation keys there, so nothing was changed: drop or disable it, or run this as % (docs/security.md#kandev_meta)',
      meta, owner, foreign_code, current_user, owner
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
END
$$;
