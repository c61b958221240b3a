// What each migration does, written once. Migration files are frozen: each names one step, and a
// release that changes the SQL adds a pair of files (upgrade, then activate) named for its version,
// so `node-pg-migrate up` on a database installed by any earlier release has something to run.
//
// Nothing a migration needs lives on the database session, which behind a transaction pooler serves
// other clients between transactions (docs/install.md#behind-a-connection-pooler): every transaction
// starts with the guard (sql/guards/migration-guard.sql) and sets nothing beyond itself. What `subagent-context
// up` and `uninstall` tell the migrations comes as the second argument of each step (`run`, below), which
// src/install.ts's migration loader passes; plain node-pg-migrate calls a step with `pgm` alone.
import { PG_MIGRATE_LOCK_ID } from 'node-pg-migrate';
import {
  deactivateStatements, inlineValues, installedCode, installStatements, migrationGuard, PIN_SEARCH_PATH, quoteIdent,
  targetSchema, uninstallStatements,
} from '../../sql/loader.js';
import { healthIndexStatements } from '../../sql/health-index.js';

/**
 * @typedef {import('node-pg-migrate').MigrationBuilder} MigrationBuilder
 * @typedef {object} CliRun What `subagent-context up` and `uninstall` tell the migrations (src/install.ts).
 * @property {string} schema where to install
 * @property {string} bookkeeping node-pg-migrate's bookkeeping table, quoted
 * @property {number | null} recorded how many migrations it held when the run began (null: unreadable);
 *   each migration's guard checks it, and counts its own
 * @property {boolean} open an activation left a transaction open for node-pg-migrate's record of it,
 *   which the CLI commits
 */

/**
 * Plain `node-pg-migrate` (its own command: one run per process) sets --schema as the search_path of its
 * session before the first migration; each of our transactions puts it back (RESET), so the schema read
 * by the first one is kept here for the rest of the run. A program calling node-pg-migrate's runner
 * itself may run several schemas in one process: it reads the search_path every time and is left as is.
 * @type {string | null}
 */
let commandSchema = null;
const ownCommand = /(^|[\\/])node-pg-migrate(\.[cm]?[jt]s)?$/.test(process.argv[1] ?? '');

/**
 * Where this migration installs and what its transactions start and end with: `guard(opts)` renders
 * sql/guards/migration-guard.sql; `after` is the statement that ends each transaction (plain node-pg-migrate's
 * own command: RESET search_path), or null.
 * @param {MigrationBuilder} pgm @param {'up' | 'down'} direction @param {CliRun | null} run
 * @returns {Promise<Step>}
 * @typedef {object} Step one migration's transaction, as prepare() sets it up
 * @property {CliRun | null} run
 * @property {string} schema
 * @property {(opts?: { holdIndexBuilds?: boolean }) => string} guard
 * @property {import('../../sql/loader.js').Select} select
 * @property {string | null} after
 */
async function prepare(pgm, direction, run) {
  let schema;
  let expectedSchema = null;
  if (run) {
    schema = await targetSchema(pgm, run.schema);
  } else if (ownCommand && commandSchema) {
    schema = commandSchema;
  } else {
    schema = await targetSchema(pgm);
    // Read outside the transaction: the transaction must see it too, or it is not on node-pg-migrate's session.
    expectedSchema = schema;
    if (ownCommand) commandSchema = schema;
  }
  const expected = run && run.recorded !== null ? run.recorded : null;
  // This migration's transaction (node-pg-migrate's BEGIN ... COMMIT) commits one the activation left open.
  if (run) run.open = false;
  if (run && run.recorded !== null) run.recorded += direction === 'up' ? 1 : -1;
  const guard = ({ holdIndexBuilds = false } = {}) => migrationGuard(schema, {
    lock: String(PG_MIGRATE_LOCK_ID), bookkeeping: run ? run.bookkeeping : null, expected,
    schema: expectedSchema, holdIndexBuilds,
  });
  return { run, schema, guard, select: select(pgm, run), after: ownCommand && !run ? 'RESET search_path' : null };
}

/**
 * One transaction of a migration: the guard first, then `statements`, then what ends it (if anything).
 * @param {MigrationBuilder} pgm @param {Step} step @param {string[]} statements
 */
const queue = (pgm, { guard, after }, statements) => {
  pgm.sql(guard());
  for (const statement of statements) pgm.sql(statement);
  if (after) pgm.sql(after);
};

/**
 * A catalog read of ours, under the pinned search_path (docs/decisions.md#the-trust-boundary). The CLI's
 * connection pins every transaction itself (src/search-path.ts). Plain node-pg-migrate may be inside its
 * own transaction here (--single-transaction, its default) or not, and its next migration's guard reads
 * the session's schema: so the read goes in one string with the pin before it and the search_path put
 * back after it, the values written in as literals (a string is one implicit transaction, or part of
 * node-pg-migrate's).
 * @param {MigrationBuilder} pgm @param {CliRun | null} run @returns {import('../../sql/loader.js').Select}
 */
const select = (pgm, run) => async (text, values = []) => {
  if (run) return pgm.db.select(text, values);
  const notStrings = values.filter((v) => typeof v !== 'string');
  if (notStrings.length > 0) throw new Error(`subagent-context: a catalog read takes strings only, got ${typeof notStrings[0]}`);
  const read = inlineValues(text.replace(/;\s*$/, ''), values);
  // Four statements in one string: pg returns one result each.
  const results = /** @type {import('pg').QueryResult[]} */ (/** @type {unknown} */ (await pgm.db.query(`SELECT pg_catalog.set_config('subagent_context.search_path', pg_catalog.current_setting('search_path'), true);
${PIN_SEARCH_PATH};
${read};
SELECT pg_catalog.set_config('search_path', pg_catalog.current_setting('subagent_context.search_path'), true)`)));
  return /** @type {import('pg').QueryResult} */ (results[2]).rows;
};

/**
 * A statement that runs alone, outside a transaction block: a DO block gets the pin in front, in the same
 * string (one implicit transaction); what cannot run in one (CREATE INDEX CONCURRENTLY, CALL) names only
 * pg_catalog and our schema, by hand.
 * @param {string} statement
 */
const alone = (statement) => (/^(\s*--[^\n]*\n)*\s*DO\b/.test(statement) ? `${PIN_SEARCH_PATH};\n${statement}` : statement);

/**
 * First install: the data layer (created or adopted), then the code layer. One transaction.
 * @param {MigrationBuilder} pgm @param {CliRun | null} [run]
 */
export async function install(pgm, run = null) {
  const step = await prepare(pgm, 'up', run);
  queue(pgm, step, installStatements(step.schema));
}

/**
 * Upgrade in place: the data layer again (each file brings an earlier release's objects to this shape),
 * then the code layer when the installed one is not this package's (or was built for another server
 * major). One transaction: a failure changes nothing.
 * @param {MigrationBuilder} pgm @param {CliRun | null} [run]
 */
export async function upgrade(pgm, run = null) {
  const step = await prepare(pgm, 'up', run);
  const code = await installedCode(step.select, step.schema);
  queue(pgm, step, installStatements(step.schema, { code: !code?.current }));
}

/**
 * Activation, outside any transaction: health's index on task_session_messages (built CONCURRENTLY,
 * rebuilt when an earlier release built it differently), then, for plain node-pg-migrate, the guarded
 * backfill and a complete reconciliation; `subagent-context up` runs those itself right after, to report
 * what it stored and show progress. The guard goes in one transaction with the index's first step, and,
 * for the CLI, again in a transaction left open for node-pg-migrate's record of this migration (the
 * CLI's next statement commits it): another run cannot have built, or recorded, it meanwhile.
 * @param {MigrationBuilder} pgm @param {CliRun | null} [run]
 */
export async function activate(pgm, run = null) {
  const step = await prepare(pgm, 'up', run);
  const { schema, guard, after } = step;
  pgm.noTransaction();
  // A partitioned messages table takes CREATE INDEX CONCURRENTLY partition by partition (indexes/message-index-partitioned.sql).
  const [first, ...rest] = await healthIndexStatements(step.select, schema);
  if (!/^(\s*--[^\n]*\n)*\s*DO\b/.test(first)) {
    throw new Error('subagent-context: the first step of health\'s index must be a DO block, to share a transaction with the guard');
  }
  pgm.sql(`${guard({ holdIndexBuilds: true })}\n${first}`);
  for (const statement of rest) pgm.sql(alone(statement));
  if (run) {
    run.open = true;
    pgm.sql(`BEGIN;\n${guard()}`);
    return;
  }
  // Batch by batch, each committed (sql/code/backfill.sql): outside a transaction block, the procedure may commit.
  pgm.sql(`CALL ${quoteIdent(schema)}.subagent_context_backfill_run()`);
  // Then a complete reconciliation, committing after each step.
  pgm.sql(`DO $reconcile$
BEGIN
  IF pg_catalog.to_regprocedure('${quoteIdent(schema).replaceAll("'", "''")}.subagent_context_reconcile(timestamp)') IS NOT NULL THEN
    CALL ${quoteIdent(schema)}.subagent_context_reconcile_all();
  END IF;
END
$reconcile$`);
  if (after) pgm.sql(after);
}

/**
 * Uninstall: the code layer, the counters, health's index and the activation keys; the data stays.
 * @param {MigrationBuilder} pgm @param {CliRun | null} [run]
 */
export async function uninstall(pgm, run = null) {
  const step = await prepare(pgm, 'down', run);
  queue(pgm, step, uninstallStatements(step.schema));
}

/**
 * Deactivation: the activation keys go. Run by `subagent-context uninstall` (always all the way down), it
 * leaves them to the last transaction, which removes them with the trigger (uninstallStatements runs
 * uninstall/deactivate.sql): an uninstall stopped part-way (a lock it could not take, Ctrl-C) leaves capture
 * installed and activated as it was, never deactivated with its trigger still firing.
 * @param {MigrationBuilder} pgm @param {CliRun | null} [run]
 */
export async function deactivate(pgm, run = null) {
  const step = await prepare(pgm, 'down', run);
  queue(pgm, step, step.run ? [] : deactivateStatements(step.schema));
}

/**
 * A later release's half of a pair whose going down is done by the first release's migrations: only
 * the guard, for node-pg-migrate's record of it.
 * @param {MigrationBuilder} pgm @param {CliRun | null} [run]
 */
export async function nothing(pgm, run = null) {
  const { guard, after } = await prepare(pgm, 'down', run);
  pgm.sql(guard());
  if (after) pgm.sql(after);
}
