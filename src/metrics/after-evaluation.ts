// The place for work that should follow an evaluation, in the background (docs/health.md: whatever calls
// health regularly keeps it cheap). The exporter calls afterEvaluation() once an evaluation has finished,
// never while another call is still running, never making a scrape wait; `metrics --once` awaits it
// before exiting. Its errors are logged (scrubbed of secrets), never served.
import type { Evaluation, EvaluationTarget } from './evaluate.js';

export interface AfterEvaluationContext extends EvaluationTarget {
  /** Aborted when the exporter stops: stop early, leave nothing running. */
  signal: AbortSignal;
}

/** Runs after each evaluation. Nothing yet: the reconciliation step hooks in here. */
export async function afterEvaluation(evaluation: Evaluation, context: AfterEvaluationContext): Promise<void> {
  void evaluation;
  void context;
}
