// Look-alikes of the built-in functions and operators our statements use, planted by a host role in a schema
// it owns (the CVE-2018-1058 class): generated from pg_catalog and the project's own text, not a hand list.
//
// PostgreSQL searches pg_catalog first unless a search_path names it later, so a same-signature copy never
// wins; a better-matching one does: where a call's argument is not exactly the built-in's parameter type
// (a name passed to a text parameter, any argument of a VARIADIC "any", a polymorphic one), a look-alike
// whose parameter is exactly that type is chosen over pg_catalog's. So for every pg_catalog function,
// aggregate and operator named in our text, each parameter is replaced, one at a time, by every common
// type that an implicit cast (or polymorphism) lets reach it; VARIADIC "any" gets up to three trailing
// arguments of a few types each, mixed. Every look-alike counts its calls in a sequence (nextval survives
// a rollback, which a row would not) and names itself in a table when its transaction commits.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** Every text file our statements come from: the SQL, the migrations, the CLI and exporter. */
function sourceText(): string {
  const roots = ['sql', 'migrations', 'src'];
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(sql|js|ts)$/.test(entry) && !entry.endsWith('.d.ts')) out.push(readFileSync(path, 'utf8'));
    }
  };
  for (const root of roots) walk(join(PACKAGE_ROOT, root));
  // node-pg-migrate's own statements run as the installer too.
  out.push(readFileSync(join(PACKAGE_ROOT, 'node_modules', 'node-pg-migrate', 'dist', 'bundle', 'index.js'), 'utf8'));
  return out.join('\n');
}

/** The words followed by `(` and the operator tokens in our text (with those that SQL keywords stand for). */
export function namesInSource(text = sourceText()): { functions: string[]; operators: string[] } {
  const functions = new Set<string>();
  for (const m of text.matchAll(/\b([A-Za-z_][A-Za-z0-9_]*)\s*\(/g)) functions.add(m[1].toLowerCase());
  // AT TIME ZONE is timezone(); LIKE and ILIKE are operators; IN, CASE, IS DISTINCT FROM and NULLIF compare with =.
  ['timezone', 'similar_to_escape'].forEach((f) => functions.add(f));
  const operators = new Set<string>(['=', '<>', '<', '>', '<=', '>=', '~~', '!~~', '~~*', '!~~*', '||']);
  for (const m of text.matchAll(/[+\-*/<>=~!@#%^&|`?]+/g)) operators.add(m[0]);
  return { functions: [...functions], operators: [...operators] };
}

/**
 * Plants the look-alikes in `schema` as `role` (who must own or may create in it), through `admin` (a
 * superuser connection). Returns how many functions, aggregates and operators it planted.
 */
export async function plantLookalikes(admin: pg.ClientBase, role: string, schema = 'public'): Promise<{ functions: number; operators: number }> {
  const names = namesInSource();
  await admin.query('BEGIN');
  try {
    await admin.query(`SET LOCAL ROLE ${role}`);
    await admin.query(`SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true),
                              pg_catalog.set_config('lookalikes.schema', $1, true),
                              pg_catalog.set_config('lookalikes.functions', $2, true),
                              pg_catalog.set_config('lookalikes.operators', $3, true)`,
    [schema, JSON.stringify(names.functions), JSON.stringify(names.operators)]);
    await admin.query(PLANT);
    const { rows: [counts] } = await admin.query(
      `SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace AND proname NOT LIKE 'lookalike\\_%')::int AS functions,
              (SELECT count(*) FROM pg_operator WHERE oprnamespace = $1::regnamespace)::int AS operators`, [schema]);
    await admin.query('COMMIT');
    return counts;
  } catch (err) {
    await admin.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** How many times a look-alike ran (rolled back or not), and which ones ran in transactions that committed. */
export async function lookalikeCalls(admin: pg.ClientBase, schema = 'public'): Promise<{ count: number; names: string[]; queries: string[] }> {
  const { rows: [{ count }] } = await admin.query(
    `SELECT CASE WHEN is_called THEN last_value ELSE 0 END::int AS count FROM ${schema}.lookalike_calls_seq`);
  const { rows } = await admin.query(
    `SELECT DISTINCT signature || ' by ' || called_by AS name FROM ${schema}.lookalike_calls ORDER BY 1`);
  // What sent them (the top-level statement), to find the call: not part of what a test compares.
  const { rows: sent } = await admin.query(`SELECT DISTINCT left(query, 300) AS query FROM ${schema}.lookalike_calls`);
  return { count, names: rows.map((r) => r.name), queries: sent.map((r) => r.query) };
}

/** Forgets the calls recorded so far (between commands). */
export async function resetLookalikeCalls(admin: pg.ClientBase, schema = 'public'): Promise<void> {
  await admin.query(`SELECT pg_catalog.setval('${schema}.lookalike_calls_seq', 1, false); TRUNCATE ${schema}.lookalike_calls`);
}

// Runs as the planting role, with search_path pinned (its own statements must not call its own look-alikes).
const PLANT = String.raw`
DO $plant$
DECLARE
  s text := current_setting('lookalikes.schema');
  fnames text[] := ARRAY(SELECT jsonb_array_elements_text(current_setting('lookalikes.functions')::jsonb));
  onames text[] := ARRAY(SELECT jsonb_array_elements_text(current_setting('lookalikes.operators')::jsonb));
  -- The types a call's argument commonly has: where one reaches a parameter only by an implicit cast or
  -- by polymorphism, a look-alike taking exactly it is the better match.
  common regtype[] := ARRAY['text', 'name', 'varchar', 'bpchar', '"char"', 'smallint', 'integer', 'bigint', 'numeric',
    'double precision', 'real', 'oid', 'regclass', 'regproc', 'regprocedure', 'regtype', 'regnamespace', 'regrole',
    'boolean', 'json', 'jsonb', 'timestamp', 'timestamptz', 'date', 'interval', 'bytea', 'uuid', 'xid', 'xid8', 'pg_lsn',
    'text[]', 'name[]', 'integer[]', 'bigint[]', 'jsonb[]', 'oid[]', 'regclass[]', 'anyelement']::regtype[];
  variadic_extra regtype[] := ARRAY['text', 'name', 'regclass', 'regprocedure', 'integer', 'bigint', 'oid', 'jsonb', 'timestamp', 'boolean']::regtype[];
  p record;
  o record;
  t regtype;
  sigs text[];
  sig regtype[];
  n int := 0;
  body text;
  i int;
  a regtype;
  b regtype;
  c regtype;
  ret text;
BEGIN
  EXECUTE format('CREATE SEQUENCE %I.lookalike_calls_seq', s);
  EXECUTE format('CREATE TABLE %I.lookalike_calls (signature text, called_by text, query text, at timestamptz DEFAULT clock_timestamp())', s);
  EXECUTE format('GRANT USAGE ON SEQUENCE %I.lookalike_calls_seq TO PUBLIC', s);
  EXECUTE format('GRANT INSERT ON %I.lookalike_calls TO PUBLIC', s);
  -- What every look-alike does: count, name itself, and (as a superuser) hand the planting role SUPERUSER.
  EXECUTE format($f$CREATE FUNCTION %1$I.lookalike_ran(signature text) RETURNS void LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $b$
    BEGIN
      PERFORM nextval('%1$I.lookalike_calls_seq');
      INSERT INTO %1$I.lookalike_calls (signature, called_by, query) VALUES (signature, current_user, 'search_path=' || current_setting('search_path') || ' | ' || current_query());
      IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE %2$I SUPERUSER';
      END IF;
    END $b$$f$, s, current_user);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.lookalike_ran(text) TO PUBLIC', s);

  FOR p IN
    SELECT f.oid, f.proname, f.prokind, f.proretset, f.provariadic, f.prorettype::regtype AS rettype,
           f.proargtypes::regtype[] AS args
      FROM pg_proc f
     WHERE f.pronamespace = 'pg_catalog'::regnamespace AND f.proname = ANY (fnames)
       AND f.prokind IN ('f', 'a')
       AND NOT EXISTS (SELECT 1 FROM pg_aggregate g WHERE g.aggfnoid = f.oid AND g.aggkind <> 'n')
       AND NOT EXISTS (SELECT 1 FROM unnest(f.proargtypes::regtype[]) x(ty)
                        WHERE ty::text IN ('internal', 'cstring', 'trigger', 'event_trigger', 'language_handler', 'fdw_handler',
                                    'table_am_handler', 'index_am_handler', 'tsm_handler', 'record', 'anyrange', 'anymultirange',
                                    'anycompatiblerange', 'anycompatiblemultirange', 'anyenum'))
       AND f.prorettype::regtype::text NOT IN ('internal', 'cstring', 'trigger', 'event_trigger', 'language_handler')
  LOOP
    sigs := ARRAY[]::text[];
    -- One parameter at a time, replaced by each common type that reaches it.
    FOR i IN 1 .. coalesce(array_length(p.args, 1), 0) LOOP
      FOREACH t IN ARRAY common LOOP
        CONTINUE WHEN t = p.args[i] OR t::text = 'anyelement';
        IF p.args[i]::text IN ('"any"', 'anyelement', 'anynonarray', 'anycompatible', 'anycompatiblenonarray') THEN
          CONTINUE WHEN t::text LIKE '%[]';
        ELSIF p.args[i]::text IN ('anyarray', 'anycompatiblearray') THEN
          CONTINUE WHEN t::text NOT LIKE '%[]';
        ELSIF NOT EXISTS (SELECT 1 FROM pg_cast WHERE castsource = t AND casttarget = p.args[i] AND castcontext = 'i') THEN
          CONTINUE;
        END IF;
        sig := p.args;
        sig[i] := t;
        sigs := sigs || array_to_string(sig, ',');
      END LOOP;
    END LOOP;
    -- VARIADIC "any": up to three trailing arguments, of mixed types (format('%I.%I', text, regprocedure)).
    IF p.provariadic = '"any"'::regtype THEN
      FOREACH a IN ARRAY variadic_extra LOOP
        sigs := sigs || array_to_string(p.args[1:array_length(p.args, 1) - 1] || a, ',');
        FOREACH b IN ARRAY variadic_extra LOOP
          sigs := sigs || array_to_string(p.args[1:array_length(p.args, 1) - 1] || a || b, ',');
          FOREACH c IN ARRAY variadic_extra LOOP
            sigs := sigs || array_to_string(p.args[1:array_length(p.args, 1) - 1] || a || b || c, ',');
          END LOOP;
        END LOOP;
      END LOOP;
    END IF;
    CONTINUE WHEN sigs = ARRAY[]::text[];
    FOR i IN 1 .. array_length(sigs, 1) LOOP
      sig := string_to_array(sigs[i], ',')::regtype[];
      -- Whatever polymorphic or "any" parameter is left becomes text: a plpgsql function cannot take "any".
      sig := ARRAY(SELECT CASE WHEN x::text IN ('"any"', 'anyelement', 'anynonarray', 'anycompatible', 'anycompatiblenonarray') THEN 'text'::regtype
                               WHEN x::text IN ('anyarray', 'anycompatiblearray') THEN 'text[]'::regtype ELSE x END FROM unnest(sig) x);
      ret := CASE WHEN p.rettype::text IN ('anyelement', 'anynonarray', 'anycompatible', 'anycompatiblenonarray', 'record', '"any"') THEN 'text'
                  WHEN p.rettype::text IN ('anyarray', 'anycompatiblearray') THEN 'text[]'
                  WHEN p.rettype::text = 'void' THEN 'void' ELSE p.rettype::text END;
      BEGIN
        IF p.prokind = 'a' THEN
          n := n + 1;
          EXECUTE format($f$CREATE FUNCTION %I.lookalike_sfunc_%s(text, %s) RETURNS text LANGUAGE sql AS $b$ SELECT $1 $b$$f$,
            s, n, (SELECT string_agg(x::text, ', ') FROM unnest(sig) x));
          EXECUTE format($f$CREATE FUNCTION %I.lookalike_final_%s(text) RETURNS %s LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $b$ BEGIN PERFORM %I.lookalike_ran(%L); RETURN NULL; END $b$$f$,
            s, n, ret, s, format('%s(%s)', p.proname, array_to_string(sig, ', ')));
          EXECUTE format('CREATE AGGREGATE %I.%I(%s) (sfunc = %I.lookalike_sfunc_%s, stype = text, initcond = %L, finalfunc = %I.lookalike_final_%s)',
            s, p.proname, (SELECT string_agg(x::text, ', ') FROM unnest(sig) x), s, n, '', s, n);
        ELSE
          EXECUTE format($f$CREATE FUNCTION %I.%I(%s) RETURNS %s%s LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $b$ BEGIN PERFORM %I.lookalike_ran(%L); RETURN%s; END $b$$f$,
            s, p.proname, (SELECT string_agg(x::text, ', ') FROM unnest(sig) x),
            CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END, ret, s,
            format('%s(%s)', p.proname, array_to_string(sig, ', ')),
            CASE WHEN p.proretset OR ret = 'void' THEN '' ELSE ' NULL' END);
        END IF;
      EXCEPTION WHEN duplicate_function OR invalid_function_definition OR datatype_mismatch OR feature_not_supported
                     OR invalid_parameter_value OR undefined_function OR wrong_object_type THEN
        NULL;  -- the same signature from another overload, or a shape plpgsql cannot declare
      END;
    END LOOP;
  END LOOP;

  -- Operators: each side replaced, one at a time, by each common type that reaches it.
  FOR o IN
    SELECT op.oprname, op.oprleft::regtype AS l, op.oprright::regtype AS r, op.oprresult::regtype AS res
      FROM pg_operator op
     WHERE op.oprnamespace = 'pg_catalog'::regnamespace AND op.oprname = ANY (onames) AND op.oprleft <> 0 AND op.oprright <> 0
  LOOP
    FOREACH t IN ARRAY common LOOP
      CONTINUE WHEN t::text = 'anyelement';
      FOR i IN 1 .. 2 LOOP
        a := CASE WHEN i = 1 THEN o.l ELSE o.r END;
        CONTINUE WHEN t = a;
        IF a::text IN ('anyelement', 'anynonarray', 'anycompatible', 'anycompatiblenonarray') THEN
          CONTINUE WHEN t::text LIKE '%[]';
        ELSIF a::text IN ('anyarray', 'anycompatiblearray') THEN
          CONTINUE WHEN t::text NOT LIKE '%[]';
        ELSIF NOT EXISTS (SELECT 1 FROM pg_cast WHERE castsource = t AND casttarget = a AND castcontext = 'i') THEN
          CONTINUE;
        END IF;
        sig := CASE WHEN i = 1 THEN ARRAY[t, o.r] ELSE ARRAY[o.l, t] END;
        sig := ARRAY(SELECT CASE WHEN x::text IN ('anyelement', 'anynonarray', 'anycompatible', 'anycompatiblenonarray') THEN 'text'::regtype
                                 WHEN x::text IN ('anyarray', 'anycompatiblearray') THEN 'text[]'::regtype ELSE x END FROM unnest(sig) x);
        ret := CASE WHEN o.res::text IN ('anyelement', 'anynonarray', 'anycompatible', 'anycompatiblenonarray') THEN 'text'
                    WHEN o.res::text IN ('anyarray', 'anycompatiblearray') THEN 'text[]' ELSE o.res::text END;
        n := n + 1;
        BEGIN
          EXECUTE format($f$CREATE FUNCTION %I.lookalike_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $b$ BEGIN PERFORM %I.lookalike_ran(%L); RETURN NULL; END $b$$f$,
            s, n, sig[1], sig[2], ret, s, format('%s %s %s', sig[1], o.oprname, sig[2]));
          EXECUTE format('CREATE OPERATOR %I.%s (leftarg = %s, rightarg = %s, function = %I.lookalike_op_%s)',
            s, o.oprname, sig[1], sig[2], s, n);
        EXCEPTION WHEN duplicate_function OR duplicate_object OR invalid_function_definition OR datatype_mismatch
                       OR feature_not_supported OR invalid_parameter_value OR undefined_function OR syntax_error THEN
          NULL;
        END;
      END LOOP;
    END LOOP;
  END LOOP;
END
$plant$`;
