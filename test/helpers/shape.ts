// Everything an installation owns in a schema, as one comparable value: what "a second `up` changes
// nothing" and "an upgraded installation has exactly the shape of a fresh one" compare.
import type pg from 'pg';

/** The shape of the installation in `schema`; `normalized` hides the schema's name, to compare two schemas. */
export async function installationShape(pool: pg.Pool, schema: string, normalized = false): Promise<Record<string, unknown>> {
  // With only pg_catalog on the path, every definition prints its schema, public included.
  const c = await pool.connect();
  let s: Record<string, unknown>;
  try {
    await c.query('BEGIN');
    await c.query('SET LOCAL search_path = pg_catalog');
    s = (await c.query(SHAPE, [schema])).rows[0];
    await c.query('COMMIT');
  } finally {
    c.release();
  }
  if (!normalized) return s;
  const hide = (v: unknown): unknown => typeof v === 'string'
    ? v.replaceAll(`"${schema}"`, '@S').replaceAll(`${schema}.`, '@S.').replaceAll(`'${schema}'`, `'@S'`)
    : Array.isArray(v) ? v.map(hide) : v;
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, hide(v)]));
}

const SHAPE = `
  SELECT
    (SELECT json_agg(pg_get_functiondef(p.oid) || ' [' || p.proparallel::text || p.provolatile::text || ']'
                     ORDER BY p.proname, pg_get_function_identity_arguments(p.oid))
       FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace) AS functions,
    (SELECT json_agg(pg_get_triggerdef(t.oid) || ' [' || t.tgenabled::text || ']' ORDER BY t.tgname)
       FROM pg_trigger t WHERE t.tgrelid = format('%I.task_session_messages', $1::text)::regclass AND NOT t.tgisinternal) AS triggers,
    (SELECT json_agg(c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '-') || ' ' || coalesce(c.reloptions::text, '-')
                     || ' ' || coalesce(obj_description(c.oid, 'pg_class'), '-') ORDER BY c.relname)
       FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace) AS relations,
    (SELECT json_agg(i.indexdef ORDER BY i.indexname) FROM pg_indexes i WHERE i.schemaname = $1::text) AS indexes,
    (SELECT json_agg(c.conname || ' ' || pg_get_constraintdef(c.oid) ORDER BY c.conname)
       FROM pg_constraint c WHERE c.connamespace = $1::text::regnamespace) AS constraints,
    (SELECT json_agg(format_type(t.oid, NULL) || ' (' ||
                     (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                        FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0) || ')' ORDER BY t.typname)
       FROM pg_type t
      WHERE t.typnamespace = $1::text::regnamespace AND t.typtype = 'c' AND t.typrelid IN (SELECT oid FROM pg_class WHERE relkind = 'c')) AS types,
    (SELECT json_agg(a.attrelid::regclass::text || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' '
                     || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') ORDER BY a.attrelid::regclass::text, a.attnum)
       FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE a.attrelid IN (format('%I.task_session_subagents', $1::text)::regclass, format('%I.subagent_context_failures', $1::text)::regclass)
        AND a.attnum > 0 AND NOT a.attisdropped) AS columns`;
