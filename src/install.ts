// Installation through node-pg-migrate: the same migrations a user can run with plain
// `node-pg-migrate up`, so both paths install exactly the same thing.
import { runner } from 'node-pg-migrate';
import type pg from 'pg';
import { MIGRATIONS_DIR, MIGRATIONS_TABLE } from './paths.js';
import { assertSchemaExists, UserError } from './db.js';
import { quoteIdent } from './sql.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };

export async function migrate(client: pg.Client, schema: string, direction: 'up' | 'down' = 'up', count?: number) {
  await assertSchemaExists(client, schema);
  try {
    return await runner({
      dbClient: client,
      dir: MIGRATIONS_DIR,
      direction,
      count: count ?? (direction === 'down' ? Infinity : undefined),
      schema,
      migrationsTable: MIGRATIONS_TABLE,
      checkOrder: true,
      logger: silent,
    });
  } finally {
    // node-pg-migrate leaves search_path pointing at the schema; leave the session as we found it.
    await client.query('RESET search_path').catch(() => {});
  }
}

export interface BackfillResult {
  status: 'activated' | 'already activated' | 'failed';
  inserted: number;
  capture_since: string | null;
  backfill_through: string | null;
  failure: string | null;
}

/** The guarded backfill (sql/backfill.sql), as one statement: its own transaction. */
export async function backfill(client: pg.Client, schema: string): Promise<BackfillResult> {
  const { rows } = await client.query(
    `SELECT status, inserted::float8 AS inserted, capture_since, backfill_through, failure
       FROM ${quoteIdent(schema)}.subagent_context_backfill()`);
  return rows[0] as BackfillResult;
}

/** Migrations, then the guarded backfill (a no-op once activated, a retry after a failed one). */
export async function up(client: pg.Client, schema: string) {
  const applied = await migrate(client, schema, 'up');
  const result = await backfill(client, schema);
  return { applied: applied.map((m) => m.name), backfill: result };
}

export function failIfBackfillFailed(result: BackfillResult): void {
  if (result.status === 'failed') {
    throw new UserError(`backfill failed, nothing was written and no activation key was set: ${result.failure}. ` +
      'The capture trigger stays installed. Fix the cause and run `subagent-context backfill` again.');
  }
}
