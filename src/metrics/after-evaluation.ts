// The work that follows an evaluation, in the background (docs/health.md#reconciliation: whatever calls
// health regularly keeps it cheap). The exporter calls afterEvaluation() once an evaluation has finished,
// never while another call is still running, never making a scrape wait; `metrics --once` awaits it
// before exiting. Its errors are logged (scrubbed of secrets), never served.
import pg from 'pg';
import type { Evaluation, EvaluationTarget } from './evaluate.js';
import { reconcileStep, type ReconcileStep } from '../reconcile.js';

export interface AfterEvaluationContext extends EvaluationTarget {
  /** Aborted when the exporter stops: stop early, leave nothing running. */
  signal: AbortSignal;
}

/** How long one evaluation's follow-up may give the reconciliation (steps started are finished). */
export const RECONCILE_BUDGET_MS = 1000;

/**
 * Gives the reconciliation up to RECONCILE_BUDGET_MS of steps, on a connection of its own, when the
 * installation is activated and current (an older release has no reconciliation to advance). A standby
 * answers 'read_only' at once and nothing is written.
 */
export async function afterEvaluation(evaluation: Evaluation, context: AfterEvaluationContext): Promise<ReconcileStep | null> {
  if (!evaluation.up || evaluation.upgradeRequired !== false || evaluation.row?.activated !== true || context.signal.aborted) return null;
  const client = new pg.Client({ connectionString: context.databaseUrl, application_name: 'subagent-context metrics (reconciliation)' });
  client.on('error', () => {});  // a dropped connection surfaces on the next query, which fails the step
  const stop = () => { void client.end().catch(() => {}); };
  context.signal.addEventListener('abort', stop, { once: true });
  try {
    await client.connect();
    await client.query(`SELECT set_config('statement_timeout', $1, false)`, [`${context.timeoutMs}ms`]);
    const deadline = Date.now() + RECONCILE_BUDGET_MS;
    let last = await reconcileStep(client, context.schema);
    while (last.status === 'stepped' && Date.now() < deadline && !context.signal.aborted) last = await reconcileStep(client, context.schema);
    return last;
  } catch (err) {
    // The exporter is stopping and closed this connection on purpose: the step's error is that, not a fault.
    if (context.signal.aborted) return null;
    throw err;
  } finally {
    context.signal.removeEventListener('abort', stop);
    await client.end().catch(() => {});
  }
}
