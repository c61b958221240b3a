// Reads the project's .sql files for a target schema. Files name the schema as @extschema@ (the
// convention of PostgreSQL extension scripts); it is replaced by the quoted schema name.
import { readFileSync } from 'node:fs';

const SQL_DIR = new URL('../../sql/', import.meta.url);

/** The files that make up an installation, in the order they must be applied. */
export const INSTALL_FILES = [
  'table.sql', 'failures.sql', 'stats.sql', 'parse.sql', 'derive.sql', 'keys.sql',
  'capture.sql', 'backfill.sql', 'health.sql',
];

export const HOST_TABLES = ['kandev_meta', 'task_sessions', 'task_session_messages'];

export function quoteIdent(name) {
  return '"' + String(name).replaceAll('"', '""') + '"';
}

export function sqlFile(file, schema) {
  // The name also lands inside string literals ('@extschema@.x'::regclass), so refuse what would
  // break out of one rather than escape it twice.
  if (!schema || /['\\\0$]/.test(schema)) {
    throw new Error(`subagent-context: unusable schema name ${JSON.stringify(schema)}`);
  }
  return readFileSync(new URL(file, SQL_DIR), 'utf8').replaceAll('@extschema@', quoteIdent(schema));
}

/** A file's statements, for files that must run one statement at a time (split at `-- statement`). */
export function sqlStatements(file, schema) {
  return sqlFile(file, schema).split(/^-- statement$/m).map((x) => x.trim()).filter(Boolean);
}

/**
 * The schema a node-pg-migrate run targets: node-pg-migrate sets search_path to its --schema, so it is
 * current_schema(). Refuses, naming what is missing, when the schema or kandev's tables are absent.
 */
export async function targetSchema(pgm) {
  const [{ schema, path }] = await pgm.db.select(
    `SELECT current_schema() AS schema, current_setting('search_path') AS path`);
  if (!schema) {
    throw new Error(`subagent-context: schema not found (search_path is ${path}); create it or pass --schema`);
  }
  const rows = await pgm.db.select(
    `SELECT t AS name FROM unnest($1::text[]) AS t
      WHERE to_regclass(format('%I.%I', $2::text, t)) IS NULL`, [HOST_TABLES, schema]);
  if (rows.length > 0) {
    throw new Error(`subagent-context: kandev's host tables are missing in schema "${schema}": ${rows
      .map((r) => r.name).join(', ')}. Install into the schema that holds kandev's tables (--schema).`);
  }
  return schema;
}
