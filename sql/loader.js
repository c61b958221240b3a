// The loader: the one way from a .sql file in sql/ to the statements that run, for the migrations
// (migrations/lib/steps.js, which plain node-pg-migrate runs too) and the CLI (`#sql` in package.json).
//
// Every file is plain SQL that runs under psql once @extschema@ (the target schema, as in PostgreSQL
// extension scripts) is replaced; that is the only placeholder. What differs per installation is data
// (the installation record, the locks a transaction takes) and is passed as statements of its own.
//
// An installation has two layers (docs/upgrade.md):
// - data, kept across releases: the subagent table, the failure log, the counters, the reconciliation's
//   record, health's index on task_session_messages. Its files create or adopt, and are safe to apply again.
// - code, replaced as a whole by every release: types, functions, the trigger. Applying it first drops
//   the code of any earlier release (code/drop-code.sql), then creates this release's, in one transaction,
//   keeping the trigger's ENABLE / ENABLE ALWAYS / DISABLE state, and records what it installed.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { splitStatements } from './statements.js';

/**
 * @typedef {(text: string, values?: unknown[]) => Promise<Record<string, any>[]>} Select
 *   a catalog read: node-pg-migrate's pgm.db.select, or a pg client wrapped
 * @typedef {{ db: { select: Select } }} MigrationBuilderLike what targetSchema() needs of node-pg-migrate's pgm
 * @typedef {object} InstalledCode the installed code layer (installedCode())
 * @property {string} version
 * @property {string | null} code_digest
 * @property {number | null} server_major
 * @property {boolean} health subagent_context_health() is there to ask (a removal by hand that stopped halfway may have dropped it)
 * @property {boolean} current this package's code, built for this server major
 */

const SQL_DIR = new URL('./', import.meta.url);

export const PACKAGE_VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

/**
 * sql/manifest.txt: every section's files, in order ({ install: ['guards/citus-check.sql', …], … }). The one
 * list of what runs and in which order, which a DBA's psql run reads too.
 */
export const MANIFEST = /** @type {Record<'install' | 'index' | 'index-partitioned' | 'deactivate' | 'uninstall' | 'drop-data', string[]>} */ (readManifest(readFileSync(new URL('manifest.txt', SQL_DIR), 'utf8')));

/** @param {string} text @returns {Record<string, string[]>} */
function readManifest(text) {
  /** @type {Record<string, string[]>} */
  const sections = {};
  /** @type {string | null} */
  let current = null;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) continue;
    const header = /^\[([a-z-]+)\]/.exec(line);
    if (header) sections[current = header[1] ?? ''] = [];
    else if (current) sections[current].push(line);
    else throw new Error(`subagent-context: sql/manifest.txt: ${line} is outside any section`);
  }
  return sections;
}

/** The data layer and the code layer: the folders data/ and code/, in [install]'s order. */
export const DATA_FILES = MANIFEST.install.filter((f) => f.startsWith('data/'));
export const CODE_FILES = MANIFEST.install.filter((f) => f.startsWith('code/'));

export const HOST_TABLES = ['kandev_meta', 'task_sessions', 'task_session_messages'];

/** The two activation keys in kandev_meta (docs/health.md#activation-keys). */
export const ACTIVATION_KEYS = ['subagent_context_capture_since', 'subagent_context_backfill_through'];

/** The six capture counters (data/counters.sql), each a sequence subagent_context_<name>_seq. */
export const COUNTERS = ['attempted', 'skipped_no_identity', 'persisted', 'failed', 'anomalous_value', 'unknown_execution'];

/**
 * Can this metadata text be a subagent call? The literal `subagent_task` is part of what qualifies
 * (docs/decisions.md#derivation): one pass over the text, and no writer that exists escapes the letters
 * of a kind. The definition: the SQL files spell it out where an expression must stand alone (the
 * trigger's WHEN clause, health's index predicate, subagent_context_may_qualify()), and test/host/prefilter.test.ts
 * holds every spelling to this one.
 * @param {string} text @returns {string}
 */
export function MAY_QUALIFY(text) {
  return `strpos(${text}, 'subagent_task') > 0`;
}

/**
 * Health's index on task_session_messages (message-index*.sql): its definition after `ON <table>`, and
 * the comment that names it. The comment carries a digest of the definition, so an index built by a
 * release with another predicate is recognised and rebuilt; the SQL files spell both out, and
 * test/host/prefilter.test.ts holds them to these.
 */
const HEALTH_INDEX_DEFINITION = `(created_at) WHERE ${MAY_QUALIFY('metadata')}`;
export const HEALTH_INDEX = {
  definition: HEALTH_INDEX_DEFINITION,
  comment: `subagent-context: prefilter ${createHash('sha256').update(HEALTH_INDEX_DEFINITION).digest('hex').slice(0, 12)}`,
};

/**
 * The search_path every transaction of ours runs under, and the statement that pins it for the transaction
 * it runs in (never for the session: a pooler's server session serves other clients next). A name a host
 * role can plant (a function or operator in a schema it owns, with a better-matching signature than the
 * built-in) then resolves to pg_catalog's; our own objects are always named with their schema
 * (docs/decisions.md#the-trust-boundary). The statement itself names only pg_catalog: it runs before the pin.
 */
export const PINNED_SEARCH_PATH = 'pg_catalog, pg_temp';
export const PIN_SEARCH_PATH = `SELECT pg_catalog.set_config('search_path', '${PINNED_SEARCH_PATH}', true)`;

/** A name as an SQL identifier, always quoted: the one quoter of this package. @param {string} name */
export function quoteIdent(name) {
  return '"' + String(name).replaceAll('"', '""') + '"';
}

/**
 * A string as an SQL literal, whatever standard_conforming_strings says (E'' with backslashes doubled); any
 * other type is refused.
 * @param {unknown} value
 */
export function stringLiteral(value) {
  if (typeof value !== 'string') throw new Error(`subagent-context: a value written into a statement must be a string, got ${typeof value}`);
  return `E'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

/**
 * `text` with its parameters $1, $2, ... written in as literals: for a statement sent with others in one
 * simple query, which takes no parameters. A value is a string or null (NULL); a parameter without one is
 * refused.
 * @param {string} text @param {unknown[]} values @returns {string}
 */
export function inlineValues(text, values) {
  return text.replace(/\$(\d+)/g, (_, /** @type {string} */ n) => {
    if (Number(n) > values.length) throw new Error(`subagent-context: no value given for $${n}`);
    const value = values[Number(n) - 1];
    return value === null ? 'NULL' : stringLiteral(value);
  });
}

/** @param {string} file */
function source(file) {
  return readFileSync(new URL(file, SQL_DIR), 'utf8');
}

/** What this package's code layer is: changes whenever any code file changes, whatever the version says. */
export const CODE_DIGEST = createHash('sha256').update(CODE_FILES.map(source).join('\0')).digest('hex').slice(0, 16);

/** One file of sql/, rendered for `schema`. @param {string} file @param {string} schema @returns {string} */
export function sqlFile(file, schema) {
  // The name also lands inside string literals ('@extschema@.x'::regclass), so refuse what would
  // break out of one rather than escape it twice.
  if (!schema || /['\\\0$]/.test(schema)) {
    throw new Error(`subagent-context: unusable schema name ${JSON.stringify(schema)}`);
  }
  return source(file).replaceAll('@extschema@', quoteIdent(schema));
}

/**
 * A file's statements, for files that must run one statement at a time (split at `-- statement`).
 * @param {string} file @param {string} schema @returns {string[]}
 */
export function sqlStatements(file, schema) {
  return sqlFile(file, schema).split(/^-- statement$/m).map((x) => x.trim()).filter(Boolean);
}

/**
 * A manifest section as the statements of one transaction, the search_path pinned first, `skip` left out
 * and `extra` after. Every statement goes alone: Citus forwards some DDL's whole query string to its
 * workers, where more than one command fails.
 * @param {string} schema @param {keyof typeof MANIFEST} section
 * @param {{ skip?: (file: string) => boolean, extra?: string[] }} [opts]
 * @returns {string[]}
 */
function transaction(schema, section, { skip = () => false, extra = [] } = {}) {
  return [PIN_SEARCH_PATH, ...MANIFEST[section].filter((f) => !skip(f)).map((f) => sqlFile(f, schema)), ...extra]
    .flatMap(splitStatements);
}

/**
 * Install or upgrade, as the statements of one transaction: the data layer (each file brings an earlier
 * release's objects to this shape), then, when `code` is true, the code layer and the record of what it
 * installed (subagent_context_installation()).
 * @param {string} schema @param {{ code?: boolean }} [opts] @returns {string[]}
 */
export function installStatements(schema, { code = true } = {}) {
  const record = `SELECT ${quoteIdent(schema)}.subagent_context_record_installation(${stringLiteral(PACKAGE_VERSION)}, ${stringLiteral(CODE_DIGEST)})`;
  // Last: an installation whose activation would refuse (code/meta-writable.sql) is not installed either.
  const meta = `SELECT ${quoteIdent(schema)}.subagent_context_assert_meta_writable()`;
  return transaction(schema, 'install', { skip: (f) => !code && f.startsWith('code/'), extra: code ? [record, meta] : [meta] });
}

/**
 * The first statements of every transaction a migration runs (guards/migration-guard.sql), told what to check
 * through a transaction-local setting: { lock, bookkeeping, expected, schema, holdIndexBuilds }. One string.
 * It reads the session's schema (node-pg-migrate's --schema) before it pins the search_path, which it does
 * before anything else runs, node-pg-migrate's own statements of the transaction included.
 * @param {string} schema
 * @param {{ lock: string, bookkeeping?: string | null, expected?: number | null, schema?: string | null, holdIndexBuilds?: boolean }} given
 * @returns {string}
 */
export function migrationGuard(schema, { lock, bookkeeping = null, expected = null, schema: expectedSchema = null, holdIndexBuilds = false }) {
  const given = JSON.stringify({ lock, bookkeeping, expected, schema: expectedSchema, hold_index_builds: holdIndexBuilds });
  return `SELECT pg_catalog.set_config('subagent_context.migration_guard', ${stringLiteral(given)}, true),
       pg_catalog.set_config('subagent_context.session_schema', coalesce(pg_catalog.current_schema(), ''), true);
${PIN_SEARCH_PATH};
${sqlFile('guards/migration-guard.sql', schema)}`;
}

/**
 * Deactivation (the activation keys and an unfinished backfill's position go), as its statements.
 * @param {string} schema @returns {string[]}
 */
export function deactivateStatements(schema) {
  return MANIFEST.deactivate.flatMap((f) => splitStatements(sqlFile(f, schema)));
}

/**
 * Uninstall, as the statements of one transaction: the trigger and what is not data, then the code (the data stays).
 * @param {string} schema @returns {string[]}
 */
export function uninstallStatements(schema) {
  return transaction(schema, 'uninstall');
}

/**
 * `uninstall --drop-data`, after the uninstall: the derived rows and the failure log, each statement alone.
 * @param {string} schema @returns {string[]}
 */
export function dropDataStatements(schema) {
  return MANIFEST['drop-data'].flatMap((f) => sqlStatements(f, schema));
}

/**
 * The installed code layer: { version, code_digest, server_major, health, current } or null when there is none.
 * health: subagent_context_health() is there (a removal by hand that stopped halfway may have dropped it).
 * current: it is this package's release and code, built for this server major (else the code layer must be applied).
 * `select(text, values)` returns rows: node-pg-migrate's pgm.db.select, or a pg client wrapped.
 * @param {Select} select @param {string} schema @returns {Promise<InstalledCode | null>}
 */
export async function installedCode(select, schema) {
  const [{ fn, health, major }] = await select(
    `SELECT to_regprocedure(format('%I.subagent_context_installation()', $1::text)) AS fn,
            to_regprocedure(format('%I.subagent_context_health()', $1::text)) AS health,
            current_setting('server_version_num')::int / 10000 AS major`, [schema]);
  if (!fn) {
    // 0.1.0 recorded nothing; its health function is how it is recognised.
    return health ? { version: '0.1.0', code_digest: null, server_major: null, health: true, current: false } : null;
  }
  const [row] = await select(`SELECT version, code_digest, server_major FROM ${quoteIdent(schema)}.subagent_context_installation()`);
  // Code applied by hand (psql) records nothing: what it is cannot be told, so `up` applies it again.
  if (!row) return { version: 'unknown', code_digest: null, server_major: null, health: Boolean(health), current: false };
  // A release that changes no SQL still records its own version (what health and the upgrade window compare).
  return { version: row.version, code_digest: row.code_digest, server_major: row.server_major, health: Boolean(health),
    current: row.version === PACKAGE_VERSION && row.code_digest === CODE_DIGEST && Number(row.server_major) === Number(major) };
}

/**
 * The schema a node-pg-migrate run targets: `given` (what `subagent-context up` says), else
 * current_schema(), node-pg-migrate setting search_path to its --schema. Refuses, naming what is
 * missing, when the schema or kandev's tables are absent.
 * @param {MigrationBuilderLike} pgm @param {string} [given] @returns {Promise<string>}
 */
export async function targetSchema(pgm, given) {
  const [{ schema, path }] = given ? [{ schema: given, path: null }] : await pgm.db.select(
    `SELECT pg_catalog.current_schema() AS schema, pg_catalog.current_setting('search_path') AS path`);
  if (!schema) {
    throw new Error(`subagent-context: schema not found (search_path is ${path}); create it or pass --schema`);
  }
  const rows = await pgm.db.select(
    // Outside a transaction, under node-pg-migrate's search_path: every name qualified.
    `SELECT t AS name FROM pg_catalog.unnest($1::text[]) AS t
      WHERE pg_catalog.to_regclass(pg_catalog.format('%I.%I', $2::text, t)) IS NULL`, [HOST_TABLES, schema]);
  if (rows.length > 0) {
    throw new Error(`subagent-context: kandev's host tables are missing in schema "${schema}": ${rows
      .map((r) => r.name).join(', ')}. Install into the schema that holds kandev's tables (--schema).`);
  }
  return schema;
}
