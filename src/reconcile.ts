// The reconciliation from the CLI (sql/code/reconcile.sql): one bounded step per statement, so no snapshot
// outlives a step. `up` and `health --full` run one to completion (with progress on a terminal); every
// `health` and every metrics evaluation gives it a little time afterwards, which keeps it current with
// nothing extra to schedule (docs/health.md#reconciliation).
import type pg from 'pg';
import { quoteIdent } from '#sql';
import type { ProgressStream } from './progress.js';
import { step as progressStep } from './output.js';
import { inStep } from './db.js';

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

/**
 * How long `health` and `metrics --once` give the reconciliation after answering (a step started is
 * finished), in steps of SHORT_STEP_MESSAGES, so the command still ends well within a second. The
 * exporter, which runs on, gives it as long as it has work (catching up after a burst at the backfill's
 * rate): src/metrics/after-evaluation.ts.
 */
export const BACKGROUND_MS = 400;
export const SHORT_STEP_MESSAGES = 1000;

const TS = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;

/**
 * One step, in a transaction of its own (inStep: the server stops it when this process is gone). `notBefore`
 * (a UTC timestamp from the server's clock): only a run that started at or after it counts; without it, a
 * new run starts when the newest completed one is older than the configured interval. `statementTimeoutMs`:
 * the step's statement_timeout, set for its transaction only: behind a pooler in transaction mode this
 * server session serves other clients next (docs/install.md#behind-a-connection-pooler).
 */
export async function reconcileStep(client: pg.ClientBase, schema: string, notBefore: string | null = null,
  statementTimeoutMs?: number, batchMessages?: number): Promise<ReconcileStep> {
  return inStep(client, async () => (await client.query(
    `SELECT status, reconciliation_id::float8 AS reconciliation_id, to_char(started_at, ${TS}) AS started_at,
            to_char(compared_through, ${TS}) AS compared_through, messages_compared::float8 AS messages_compared,
            missing::float8 AS missing, excess::float8 AS excess, completed
       FROM ${quoteIdent(schema)}.subagent_context_reconcile($1::timestamp)`, [notBefore])).rows[0] as ReconcileStep,
  { ...(statementTimeoutMs === undefined ? {} : { statement_timeout: `${statementTimeoutMs}ms` }),
    ...(batchMessages === undefined ? {} : { 'subagent_context.batch_messages': String(batchMessages) }) });
}

/**
 * Steps for at most `budgetMs` (BACKGROUND_MS by default; a step started is finished, and one is started only
 * when the last one's time fits in what is left): what health and the
 * metrics exporter do after answering. Stops early when there is nothing to do, the server cannot write,
 * or `stop` aborts. `batchMessages`: the steps' size (SHORT_STEP_MESSAGES for a command that must end soon).
 */
export async function reconcileFor(client: pg.ClientBase, schema: string,
  opts: { stop?: AbortSignal; statementTimeoutMs?: number; budgetMs?: number; batchMessages?: number } = {}): Promise<ReconcileStep> {
  const deadline = Date.now() + (opts.budgetMs ?? BACKGROUND_MS);
  const step = () => reconcileStep(client, schema, null, opts.statementTimeoutMs, opts.batchMessages);
  let started = Date.now();
  let last = await step();
  // A step started is finished, so none is started that the last one's time says would end past the
  // budget (on Citus a short step takes a few hundred ms: `health` stays within a second).
  while (last.status === 'stepped' && !opts.stop?.aborted && Date.now() + (Date.now() - started) <= deadline) {
    started = Date.now();
    last = await step();
  }
  return last;
}

/**
 * How many messages a run compares (the candidates of health's index from activation to its start): the
 * progress bar's total, counted once; 0 where it cannot be counted (then the bar shows the time only).
 */
async function candidates(client: pg.ClientBase, schema: string, startedAt: string): Promise<number> {
  const s = quoteIdent(schema);
  try {
    return (await inStep(client, () => client.query(
      `SELECT count(*)::float8 AS n FROM ${s}.task_session_messages AS m
        WHERE m.created_at >= ${s}.subagent_context_capture_since() AND m.created_at < $1::timestamp
          AND ${s}.subagent_context_may_qualify(m.metadata)`, [startedAt]))).rows[0].n as number;
  } catch {
    return 0;
  }
}

/**
 * A complete reconciliation. `now`: one that compares everything written up to this call (a run in
 * progress that started earlier is superseded; another session stepping it meanwhile is waited for);
 * otherwise the one in progress, or a new one when the newest completed one is older than the configured
 * interval. Progress on `stream` when it is a terminal. Returns the last step ('completed' or 'current', or
 * why it could not: 'busy', 'read_only', 'not_activated').
 */
export async function reconcileAll(client: pg.ClientBase, schema: string, opts: { stream?: ProgressStream; now?: boolean } = {}): Promise<ReconcileStep> {
  const { stream } = opts;
  const shown = stream?.isTTY ? progressStep('reconciliation: comparing history with the rows', { stream, quiet: true }) : undefined;
  try {
    const notBefore = opts.now
      ? (await client.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS now`)).rows[0].now as string : null;
    let last: ReconcileStep;
    let total: number | null = null;
    for (let busy = 0; ; ) {
      last = await reconcileStep(client, schema, notBefore);
      if (shown && last.started_at) {
        total ??= await candidates(client, schema, last.started_at);
        if (total) shown.update(Math.min(last.messages_compared ?? 0, total), total);
      }
      if (last.status === 'stepped') continue;
      // Another session holds the step for an instant (the exporter's background slice): wait for it, up to ~10 s.
      if (last.status === 'busy' && opts.now && ++busy < 100) { await new Promise((r) => setTimeout(r, 100)); continue; }
      break;
    }
    shown?.done(last.status === 'completed' || last.status === 'current'
      ? `${last.messages_compared ?? 0} subagent messages compared, ${last.missing ?? 0} missing` : last.status);
    return last;
  } catch (err) {
    shown?.fail();
    throw err;
  }
}
