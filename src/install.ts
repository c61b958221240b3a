// Installation through node-pg-migrate: the same migrations a user can run with plain
// `node-pg-migrate up`, so both paths install exactly the same thing.
import type pg from 'pg';
import { pathToFileURL } from 'node:url';
import { MIGRATIONS_DIR, MIGRATIONS_TABLE } from './paths.js';
import { assertSchemaExists, inTransaction, stepInOneTrip } from './db.js';
import { UserError } from './errors.js';
import { installStatements, quoteIdent } from '#sql';
import { readInstalled } from './installed.js';
import { progress as startProgress, type Progress, type ProgressStream } from './progress.js';
import { reconcileAll } from './reconcile.js';
import { formatCount } from './count.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * node-pg-migrate's runner, as the CLI runs it: nothing on the database session, which behind a
 * transaction pooler serves other clients between transactions (docs/install.md#behind-a-connection-pooler).
 * No session lock (noLock) and no `SET search_path` (no `schema` option): the migrations learn the schema
 * from this run (the loader below passes it to migrations/lib/steps.js), every statement of theirs names it, and each
 * transaction takes node-pg-migrate's lock for itself and checks the bookkeeping (sql/guards/migration-guard.sql).
 */
export async function migrate(client: pg.Client, schema: string, direction: 'up' | 'down' = 'up', count?: number) {
  await assertSchemaExists(client, schema);
  // Loaded here, not at the top: only up, backfill and uninstall migrate, and node-pg-migrate (with the
  // TypeScript loader it brings) is most of every other command's start-up.
  const { runner, PG_MIGRATE_LOCK_ID } = await import('node-pg-migrate');
  const bookkeeping = `${quoteIdent(schema)}.${quoteIdent(MIGRATIONS_TABLE)}`;
  const { rows: [{ existed }] } = await client.query(
    `SELECT to_regclass(format('%I.%I', $1::text, $2::text)) IS NOT NULL AS existed`, [schema, MIGRATIONS_TABLE]);
  // What the bookkeeping holds as the run begins: each migration's transaction checks that nobody else
  // changed it since. Unreadable (another role's table), node-pg-migrate says so itself below.
  const recorded = existed
    ? await client.query(`SELECT count(*)::int AS n FROM ${bookkeeping}`).then((r) => r.rows[0].n as number, () => null)
    : 0;
  // What the migrations learn from this run: each step of migrations/lib/steps.js takes it as its second
  // argument, passed by this loader (node-pg-migrate's own passes `pgm` alone).
  const run: CliRun = { schema, bookkeeping, recorded, open: false };
  const loader = async (paths: string[]) => Promise.all(paths.map(async (path) => {
    const step = await import(pathToFileURL(path).href) as { up: Step; down: Step };
    return { id: path, filePaths: [path], actions: { up: (pgm: unknown) => step.up(pgm, run), down: (pgm: unknown) => step.down(pgm, run) } };
  }));
  try {
    const applied = await runner({
      dbClient: client,
      dir: MIGRATIONS_DIR,
      direction,
      count: count ?? (direction === 'down' ? Infinity : undefined),
      migrationsSchema: schema,
      migrationsTable: MIGRATIONS_TABLE,
      noLock: true,
      checkOrder: true,
      logger: silent,
      migrationLoaderStrategies: [{ extensions: ['.js'], loader }],
    });
    // An activation left its record in a transaction of its own, behind its guard (steps.js).
    if (run.open) await client.query('COMMIT');
    return applied;
  } catch (err) {
    // A failing migration leaves the caller's connection inside the migration's aborted transaction
    // (node-pg-migrate issues BEGIN but no ROLLBACK): roll back, so the connection is usable.
    await client.query('ROLLBACK').catch(() => {});
    if (!existed) {
      // Two first installs at once: node-pg-migrate's CREATE TABLE of its bookkeeping failed, the other's
      // won. Run again, on that table: the migrations' guard decides which run goes on.
      const raced = /^Unable to ensure migrations table/.test(String((err as Error)?.message))
        && (await client.query(`SELECT to_regclass($1) IS NOT NULL AS x`, [bookkeeping]).catch(() => null))?.rows[0].x;
      if (raced) return migrate(client, schema, direction, count);
      // node-pg-migrate creates its bookkeeping table before the first migration's transaction: a first
      // install that failed would leave it behind, recording nothing. Leave the schema as it was, unless
      // another run is using it (its transaction holds node-pg-migrate's lock).
      await client.query(`DO $forget$ BEGIN
        IF pg_try_advisory_xact_lock(${PG_MIGRATE_LOCK_ID}) AND NOT EXISTS (SELECT 1 FROM ${bookkeeping}) THEN DROP TABLE ${bookkeeping}; END IF;
      END $forget$`).catch(() => {});
    }
    throw err;
  }
}

/** What a run of the CLI tells the migrations (migrations/lib/steps.js, `CliRun`). */
interface CliRun { schema: string; bookkeeping: string; recorded: number | null; open: boolean }
type Step = (pgm: unknown, run: CliRun) => Promise<void>;

export interface BackfillResult {
  status: 'activated' | 'already activated' | 'failed';
  /** Rows this run stored. */
  inserted: number;
  /** Rows an interrupted earlier run had stored, which this one continued (absent when none). */
  inserted_before?: number;
  capture_since: string | null;
  backfill_through: string | null;
  failure: string | null;
}

/**
 * How much history the backfill walks: the entries of health's index on task_session_messages (one per
 * message that passes the capture prefilter), else the table's rows, as the planner last counted them;
 * null when unknown (never analyzed).
 */
export async function historyEstimate(client: pg.Client, schema: string): Promise<number | null> {
  const { rows } = await client.query(
    `WITH idx AS (SELECT to_regclass(format('%I.subagent_context_recent_messages_idx', $1::text)) AS oid)
     SELECT coalesce(
              (SELECT sum(c.reltuples) FILTER (WHERE c.reltuples >= 0) FROM pg_class AS c, idx
                WHERE c.oid = idx.oid OR c.oid IN (SELECT i.inhrelid FROM pg_inherits AS i WHERE i.inhparent = idx.oid)),
              (SELECT nullif(greatest(c.reltuples, -1), -1) FROM pg_class AS c
                WHERE c.oid = to_regclass(format('%I.task_session_messages', $1::text))))::float8 AS rows`, [schema]);
  return rows[0]?.rows == null ? null : Math.round(rows[0].rows);
}

export interface BackfillOptions {
  /** Where to show progress while it runs; shown only when it is a TTY. */
  progress?: ProgressStream;
}

interface BackfillStep extends BackfillResult {
  more: boolean;
  batches: number;
  scanned: number;
}

/**
 * The guarded backfill (sql/code/backfill.sql), one batch per statement: each batch commits on its own, so a
 * live write of a historical message waits at most for one batch. A rerun after a failure or an
 * interruption continues where the walk stood.
 */
export async function backfill(client: pg.Client, schema: string, opts: BackfillOptions = {}): Promise<BackfillResult> {
  let progress: Progress | undefined;
  let total: number | null = null;
  if (opts.progress?.isTTY) {
    total = await historyEstimate(client, schema);
    const what = total === null ? 'messages' : `~${formatCount(total)} candidate messages`;
    progress = startProgress(`backfill: walking ${what} for subagent history, batch by batch`, { stream: opts.progress });
  }
  const step = `SELECT status, more, batches::float8 AS batches, scanned::float8 AS scanned,
                       inserted::float8 AS inserted, capture_since, backfill_through, failure
                  FROM ${quoteIdent(schema)}.subagent_context_backfill_step()`;
  // The step counts across runs; what an interrupted run stored is not this run's to report.
  // Nothing installed: the step's own error says so (no progress table to read yet).
  const progressTable = `${quoteIdent(schema)}.subagent_context_backfill_progress`;
  const { rows: [{ present }] } = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [progressTable]);
  const before = present ? Number((await client.query(
    `SELECT coalesce((SELECT inserted FROM ${progressTable}), 0)::float8 AS before`)).rows[0].before) : 0;
  try {
    for (;;) {
      const [row] = await stepInOneTrip<BackfillStep>(client, step);
      if (row.more) {
        progress?.update(row.scanned, Math.max(total ?? 0, row.scanned));
        continue;
      }
      // The caller prints the outcome once (backfillSummary): the progress line only goes away.
      progress?.clear();
      const { status, capture_since, backfill_through, failure } = row;
      if (status === 'already activated') return { status, inserted: 0, capture_since, backfill_through, failure };
      return { status, inserted: row.inserted - before, ...(before > 0 ? { inserted_before: before } : {}),
        capture_since, backfill_through, failure };
    }
  } catch (err) {
    progress?.clear();
    throw err;
  }
}


/**
 * Applies the data and code layers when the installed code is not this package's or was built for another
 * server major: what the release migrations do, for the cases no migration is pending for (a PostgreSQL
 * major upgrade, a patch release, whose code may need a data-layer table it added). One transaction.
 * Returns whether it did.
 */
export async function refreshCode(client: pg.Client, schema: string): Promise<boolean> {
  const code = await readInstalled(client, schema);
  if (!code || code.current) return false;
  await inTransaction(client, async () => {
    for (const statement of installStatements(schema)) await client.query(statement);
  });
  return true;
}

/**
 * Migrations, the code layer when it is not current, then the guarded backfill (a no-op once activated,
 * a retry after a failed one). The activation migrations leave the backfill to this call when the CLI
 * runs them (migrate()), so the result says how many rows it stored, and progress can be shown while it runs.
 */
export async function up(client: pg.Client, schema: string, opts: BackfillOptions = {}) {
  const before = await readInstalled(client, schema).catch(() => null);
  const applied = await migrate(client, schema, 'up');
  await refreshCode(client, schema);
  const after = await readInstalled(client, schema);
  const result = await backfill(client, schema, opts);
  // Health compares only what was written since the newest reconciliation: make sure one is complete
  // and recent, so that health is cheap from the start (after a first install there is nothing to compare
  // yet: one step). Run again within the hour, it finds it current and reads no history.
  const reconciliation = result.status === 'failed' ? null : await reconcileAll(client, schema, { stream: opts.progress });
  return {
    applied: applied.map((m) => m.name),
    /** The release installed before this run (null: none), and now. */
    upgraded: before && !before.current
      ? { from: before.version, to: after!.version, server_major: after!.server_major } : null,
    backfill: result,
    reconciliation,
  };
}

export function failIfBackfillFailed(result: BackfillResult): void {
  if (result.status === 'failed') {
    throw new UserError(`backfill failed, nothing was written and no activation key was set: ${result.failure}. ` +
      'The capture trigger stays installed. Fix the cause and run `subagent-context backfill` again.');
  }
}
