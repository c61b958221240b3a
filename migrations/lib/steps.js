// What each migration does, written once. Migration files are frozen: each names one step, and a
// release that changes the SQL adds a pair of files (upgrade, then activate) named for its version,
// so `node-pg-migrate up` on a database installed by any earlier release has something to run.
import {
  deactivateStatements, installedCode, installStatements, quoteIdent, targetSchema, uninstallStatements,
} from '../../sql/loader.js';
import { healthIndexStatements } from '../../sql/health-index.js';

const queue = (pgm, statements) => {
  for (const statement of statements) pgm.sql(statement);
};

const select = (pgm) => (text, values) => pgm.db.select(text, values);

/** First install: the data layer (created or adopted), then the code layer. One transaction. */
export async function install(pgm) {
  queue(pgm, installStatements(await targetSchema(pgm)));
}

/**
 * Upgrade in place: the data layer again (each file brings an earlier release's objects to this shape),
 * then the code layer when the installed one is not this package's (or was built for another server
 * major). One transaction: a failure changes nothing.
 */
export async function upgrade(pgm) {
  const schema = await targetSchema(pgm);
  const code = await installedCode(select(pgm), schema);
  queue(pgm, installStatements(schema, { code: !code?.current }));
}

/**
 * Activation, outside any transaction: health's index on task_session_messages (built CONCURRENTLY,
 * rebuilt when an earlier release built it differently), then the guarded backfill.
 * `subagent-context up` sets subagent_context.backfill_by = 'cli' and runs the backfill itself right
 * after, to report what it stored; plain node-pg-migrate gets the backfill here.
 */
export async function activate(pgm) {
  const schema = await targetSchema(pgm);
  pgm.noTransaction();
  // A partitioned messages table takes CREATE INDEX CONCURRENTLY partition by partition (message-index-partitioned.sql).
  for (const statement of await healthIndexStatements(select(pgm), schema)) pgm.sql(statement);
  // Batch by batch, each committed (sql/backfill.sql): outside a transaction block, the DO block and the
  // procedure it calls may commit.
  pgm.sql(`DO $activate$
BEGIN
  IF current_setting('subagent_context.backfill_by', true) IS DISTINCT FROM 'cli' THEN
    CALL ${quoteIdent(schema)}.subagent_context_backfill_run();
  END IF;
END
$activate$`);
  // Then a complete reconciliation, committing after each step (`subagent-context up` runs its own steps).
  pgm.sql(`DO $reconcile$
BEGIN
  IF current_setting('subagent_context.backfill_by', true) IS DISTINCT FROM 'cli'
     AND to_regprocedure('${quoteIdent(schema).replaceAll("'", "''")}.subagent_context_reconcile(timestamp)') IS NOT NULL THEN
    CALL ${quoteIdent(schema)}.subagent_context_reconcile_all();
  END IF;
END
$reconcile$`);
}

/** Uninstall: the code layer, the counters, health's index and the activation keys; the data stays. */
export async function uninstall(pgm) {
  queue(pgm, uninstallStatements(await targetSchema(pgm)));
}

export async function deactivate(pgm) {
  queue(pgm, deactivateStatements(await targetSchema(pgm)));
}

/** A later release's half of a pair whose going down is done by the first release's migrations. */
export async function nothing() {}
