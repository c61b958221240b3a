// The reconciliation from the CLI (sql/reconcile.sql): one bounded step per statement, so no snapshot
// outlives a step. `up` and `health --full` run one to completion (with progress on a terminal); every
// `health` and every metrics evaluation gives it a little time afterwards, which keeps it current with
// nothing extra to schedule (docs/health.md#reconciliation).
import type pg from 'pg';
import { quoteIdent } from '#sql';
import type { ProgressStream } from './progress.js';
import { step as progressStep } from './output.js';

export type ReconcileStatus = 'stepped' | 'completed' | 'current' | 'busy' | 'read_only' | 'not_activated';

export interface ReconcileStep {
  status: ReconcileStatus;
  reconciliation_id: number | null;
  started_at: string | null;
  compared_through: string | null;
  messages_compared: number | null;
  missing: number | null;
  excess: number | null;
  completed: boolean;
}

/** Messages per step: about a tenth of a second of parsing on a 2-core machine (BENCHMARKS.md). */
export const STEP_MESSAGES = 5000;

const TS = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;

/** One step. `minAge`: how old the newest completed reconciliation must be before a new one starts. */
export async function reconcileStep(client: pg.ClientBase, schema: string, minAge = '1 hour'): Promise<ReconcileStep> {
  const { rows } = await client.query(
    `SELECT status, reconciliation_id::float8 AS reconciliation_id, to_char(started_at, ${TS}) AS started_at,
            to_char(compared_through, ${TS}) AS compared_through, messages_compared::float8 AS messages_compared,
            missing::float8 AS missing, excess::float8 AS excess, completed
       FROM ${quoteIdent(schema)}.subagent_context_reconcile($1, $2::interval)`, [STEP_MESSAGES, minAge]);
  return rows[0] as ReconcileStep;
}

/**
 * Steps for at most `budgetMs` (a step started is finished): what health and the metrics exporter do
 * after answering. Stops early when there is nothing to do, or the server cannot write.
 */
export async function reconcileFor(client: pg.ClientBase, schema: string, budgetMs: number, minAge = '1 hour'): Promise<ReconcileStep> {
  const deadline = Date.now() + budgetMs;
  let last = await reconcileStep(client, schema, minAge);
  while (last.status === 'stepped' && Date.now() < deadline) last = await reconcileStep(client, schema, minAge);
  return last;
}

/**
 * A complete reconciliation: the one in progress, else a new one when the newest completed one started
 * more than `minAge` ago ('0': now, whatever there is). Progress on `stream` when it is a terminal.
 * Returns the last step ('completed' or 'current', or why it could not: 'busy', 'read_only', 'not_activated').
 */
export async function reconcileAll(client: pg.ClientBase, schema: string, stream?: ProgressStream, minAge = '0'): Promise<ReconcileStep> {
  const shown = stream?.isTTY ? progressStep('reconciliation: comparing history with the rows', { stream, quiet: true }) : undefined;
  try {
    let last: ReconcileStep;
    do {
      last = await reconcileStep(client, schema, minAge);
    } while (last.status === 'stepped');
    shown?.done(last.status === 'completed'
      ? `${last.messages_compared ?? 0} subagent messages compared, ${last.missing ?? 0} missing` : last.status);
    return last;
  } catch (err) {
    shown?.fail();
    throw err;
  }
}
