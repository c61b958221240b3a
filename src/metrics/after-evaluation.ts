// The work that follows an evaluation, in the background (docs/health.md#reconciliation: whatever calls
// health regularly keeps it cheap). The exporter calls afterEvaluation() once an evaluation has finished,
// never while another call is still running, never making a scrape wait; `metrics --once` awaits it
// before exiting. Its errors are logged (scrubbed of secrets), never served.
import type pg from 'pg';
import type { Evaluation, EvaluationTarget } from './evaluate.js';
import { quoteIdent } from '#sql';
import { reconcileFor, SHORT_STEP_MESSAGES, type ReconcileStep } from '../reconcile.js';
import { connectClient } from '../tls.js';

export interface AfterEvaluationContext extends EvaluationTarget {
  /** Aborted when the exporter stops: stop early, leave nothing running. */
  signal: AbortSignal;
  /**
   * `metrics --once`: a short slice (BACKGROUND_MS, small steps), as `health` gives. Otherwise (the
   * exporter) as long as there is work: after a burst the comparison catches up at its own rate, one
   * bounded step after another, whether scrapes come often, rarely, or time out.
   */
  once?: boolean;
}

/** Schemas whose reconciliation this process's role may not advance: said once, then not tried again. */
const notPermitted = new Set<string>();

/**
 * Gives the reconciliation the background budget of health (reconcileFor), on a connection of its own, when the
 * installation is activated and current (an older release has no reconciliation to advance). A standby
 * answers 'read_only' at once and nothing is written.
 */
export async function afterEvaluation(evaluation: Evaluation, context: AfterEvaluationContext): Promise<ReconcileStep | null> {
  // A slow evaluation (the database answered, health ran out of time) is the one that most needs the
  // comparison to move on: the step answers 'not_activated' at once where there is nothing to do.
  const readable = evaluation.up ? evaluation.upgradeRequired === false && evaluation.row?.activated === true : evaluation.slow === true;
  if (!readable || context.signal.aborted || notPermitted.has(context.schema)) return null;
  let client: pg.Client | undefined;
  const stop = () => { void client?.end().catch(() => {}); };
  context.signal.addEventListener('abort', stop, { once: true });
  try {
    const connected = await connectClient(context.databaseUrl, { application_name: 'subagent-context metrics (reconciliation)' }, (attempt) => {
      attempt.on('error', () => {});  // a dropped connection surfaces on the next query, which fails the step
      client = attempt;
    });
    return await reconcileFor(connected, context.schema, { stop: context.signal, statementTimeoutMs: context.timeoutMs,
      ...(context.once ? { batchMessages: SHORT_STEP_MESSAGES } : { budgetMs: Infinity }) });
  } catch (err) {
    // The exporter is stopping and closed this connection on purpose: the step's error is that, not a fault.
    if (context.signal.aborted) return null;
    if ((err as { code?: string }).code !== '42501') throw err;
    notPermitted.add(context.schema);
    throw new Error('this role may not advance the reconciliation, so health reads what was written since the last one ' +
      `another role completed; to let the exporter keep it current: GRANT EXECUTE ON FUNCTION ${quoteIdent(context.schema)}` +
      '.subagent_context_reconcile(timestamp) TO <this role> (docs/security.md#a-dashboard-role). Not tried again.', { cause: err });
  } finally {
    context.signal.removeEventListener('abort', stop);
    await client?.end().catch(() => {});
  }
}
