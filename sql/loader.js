// The loader: the one way from a .sql file in sql/ to the statements that run, for the migrations
// (migrations/lib/steps.js, which plain node-pg-migrate runs too) and the CLI (`#sql` in package.json).
//
// An installation has two layers (docs/upgrade.md):
// - data, kept across releases: the subagent table, the failure log, the counter sequences, health's index
//   on task_session_messages. Its files create or adopt, and are safe to apply again.
// - code, replaced as a whole by every release: types, functions, the trigger. Applying it first drops
//   the code of any earlier release (drop-code.sql), then creates this release's, in one transaction,
//   keeping the trigger's ENABLE / ENABLE ALWAYS / DISABLE state. It records what it installed
//   (subagent_context_installation()): the package version, a digest of the code, the server major.
//
// Files name the schema as @extschema@ (the convention of PostgreSQL extension scripts), the counter
// sequences as @counter_sequences@ (COUNTERS below), the capture prefilter as @may_qualify(text)@ and
// health's index on task_session_messages as @health_index_definition@ / @health_index_comment@
// (MAY_QUALIFY and HEALTH_INDEX below: each written once, rendered wherever it is needed).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { splitStatements } from './statements.js';

const SQL_DIR = new URL('./', import.meta.url);

export const PACKAGE_VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

/** The data layer, in the order it must be applied. */
export const DATA_FILES = ['table.sql', 'failures.sql', 'counters.sql', 'reconciliation.sql', 'backfill-progress.sql'];

/** The code layer, in the order it must be applied (installation.sql last: it records the rest). */
export const CODE_FILES = [
  'drop-code.sql', 'parse.sql', 'derive.sql', 'keys.sql', 'stats.sql', 'capture.sql', 'backfill.sql',
  'reconcile.sql', 'health.sql', 'citus.sql', 'installation.sql',
];

export const HOST_TABLES = ['kandev_meta', 'task_sessions', 'task_session_messages'];

/** The six capture counters (counters.sql), each a sequence subagent_context_<name>_seq. */
export const COUNTERS = ['attempted', 'skipped_no_identity', 'persisted', 'failed', 'anomalous_value', 'unknown_execution'];
const COUNTER_SEQUENCES = `ARRAY[${COUNTERS.map((c) => `'subagent_context_${c}_seq'`).join(', ')}]`;

/**
 * Can this metadata text be a subagent call? The literal `subagent_task` is part of what qualifies
 * (docs/decisions.md#derivation): one pass over the text, and no writer that exists escapes the letters
 * of a kind. The capture trigger's WHEN clause, health's partial index on task_session_messages and every
 * history scan (backfill, reconciliation, repair) use this one expression; the parse decides the rest.
 */
export function MAY_QUALIFY(text) {
  return `strpos(${text}, 'subagent_task') > 0`;
}

/**
 * Health's index on task_session_messages (message-index*.sql): its definition after `ON <table>`, and
 * the comment that names it. The comment carries a digest of the definition, so an index built by a
 * release with another predicate is recognised and rebuilt without anyone bumping a number by hand.
 */
const HEALTH_INDEX_DEFINITION = `(created_at) WHERE ${MAY_QUALIFY('metadata')}`;
export const HEALTH_INDEX = {
  definition: HEALTH_INDEX_DEFINITION,
  comment: `subagent-context: prefilter ${createHash('sha256').update(HEALTH_INDEX_DEFINITION).digest('hex').slice(0, 12)}`,
};

export function quoteIdent(name) {
  return '"' + String(name).replaceAll('"', '""') + '"';
}

function source(file) {
  return readFileSync(new URL(file, SQL_DIR), 'utf8');
}

/**
 * What this package's code layer is: changes whenever any code file or the prefilter they render
 * changes, whatever the version says.
 */
export const CODE_DIGEST = createHash('sha256')
  .update([...CODE_FILES.filter((f) => f !== 'installation.sql').map(source), HEALTH_INDEX.definition].join('\0'))
  .digest('hex').slice(0, 16);

export function sqlFile(file, schema) {
  // The name also lands inside string literals ('@extschema@.x'::regclass), so refuse what would
  // break out of one rather than escape it twice.
  if (!schema || /['\\\0$]/.test(schema)) {
    throw new Error(`subagent-context: unusable schema name ${JSON.stringify(schema)}`);
  }
  return source(file)
    .replace(/@may_qualify\(([^()]+)\)@/g, (_, text) => MAY_QUALIFY(text))
    .replaceAll('@health_index_definition@', HEALTH_INDEX.definition)
    .replaceAll('@health_index_comment@', HEALTH_INDEX.comment.replaceAll("'", "''"))
    .replaceAll('@extschema@', quoteIdent(schema))
    .replaceAll('@counter_sequences@', COUNTER_SEQUENCES)
    .replaceAll('@version@', PACKAGE_VERSION)
    .replaceAll('@digest@', CODE_DIGEST);
}

/** A file's statements, for files that must run one statement at a time (split at `-- statement`). */
export function sqlStatements(file, schema) {
  return sqlFile(file, schema).split(/^-- statement$/m).map((x) => x.trim()).filter(Boolean);
}

/**
 * SQL files as the statements of one transaction: the topology check first (topology.sql: on Citus it
 * refuses a wrong layout and sets what Citus needs), then every statement alone (Citus forwards some
 * DDL's whole query string to its workers, where more than one command fails).
 */
export function transactionStatements(schema, sqls) {
  return [sqlFile('topology.sql', schema), ...sqls].flatMap(splitStatements);
}

/**
 * The statement that takes, with a short lock_timeout and bounded retries, the locks on kandev's tables
 * that a transaction's DDL needs (lock-host.sql), to run first in that transaction; `locks` is
 * [[table, mode], ...].
 */
export function lockHost(schema, locks) {
  const array = `ARRAY[${locks.map(([t, m]) => `['${t}', '${m}']`).join(', ')}]`;
  return sqlFile('lock-host.sql', schema).replaceAll('@host_locks@', array);
}

/** What install and upgrade lock: task_sessions for the foreign key, task_session_messages for the trigger. */
export const INSTALL_LOCKS = [['task_sessions', 'SHARE ROW EXCLUSIVE'], ['task_session_messages', 'SHARE ROW EXCLUSIVE']];
/** What uninstall locks: DROP TRIGGER and DROP INDEX take task_session_messages whole. */
export const UNINSTALL_LOCKS = [['task_session_messages', 'ACCESS EXCLUSIVE']];

/** The data layer's SQL, one string per file. */
export function dataSql(schema) {
  return DATA_FILES.map((f) => sqlFile(f, schema));
}

/** The code layer's SQL, one string per file; run them in one transaction. */
export function codeSql(schema) {
  return CODE_FILES.map((f) => sqlFile(f, schema));
}

/** Uninstall: the code layer's objects, then the rest (the data layer's tables stay). */
export function uninstallSql(schema) {
  return ['drop-code.sql', 'uninstall.sql'].map((f) => sqlFile(f, schema));
}

/**
 * The installed code layer: { version, code_digest, server_major, current } or null when there is none.
 * current: it is this package's code, built for this server major (else the code layer must be applied).
 * `select(text, values)` returns rows: node-pg-migrate's pgm.db.select, or a pg client wrapped.
 */
export async function installedCode(select, schema) {
  const [{ fn, health, major }] = await select(
    `SELECT to_regprocedure(format('%I.subagent_context_installation()', $1::text)) AS fn,
            to_regprocedure(format('%I.subagent_context_health()', $1::text)) AS health,
            current_setting('server_version_num')::int / 10000 AS major`, [schema]);
  if (!fn) {
    // 0.1.0 recorded nothing; its health function is how it is recognised.
    return health ? { version: '0.1.0', code_digest: null, server_major: null, current: false } : null;
  }
  const [row] = await select(`SELECT version, code_digest, server_major FROM ${quoteIdent(schema)}.subagent_context_installation()`);
  return { ...row, current: row.code_digest === CODE_DIGEST && Number(row.server_major) === Number(major) };
}

/**
 * The schema a node-pg-migrate run targets: `given` (what `subagent-context up` says), else
 * current_schema(), node-pg-migrate setting search_path to its --schema. Refuses, naming what is
 * missing, when the schema or kandev's tables are absent.
 */
export async function targetSchema(pgm, given) {
  const [{ schema, path }] = given ? [{ schema: given, path: null }] : await pgm.db.select(
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
