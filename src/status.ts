// The health verdicts, once: every surface (the `health` command, the report, the metrics exporter)
// reads its exit status, its alarm level, its one-line meaning and its advice from this table.
// SQL computes which verdict applies (subagent_context_health().status, sql/code/health.sql); this file only
// says what each one means to an operator. test/status.test.ts pins the keys to the SQL's values.
import { quoteIdent } from '#sql';
import { formatCount } from './count.js';

/**
 * How loud a verdict is: ok (exit 0), alarm (a missed subagent or a stale row, exit 1), behind (not all
 * compared yet, exit 1: the check is behind, not capture), attention (capture is off or not set up, exit 2).
 */
export type Alarm = 'ok' | 'alarm' | 'behind' | 'attention';

export interface StatusFacts {
  /** The CLI's exit status (docs/health.md, exit status). */
  exit: 0 | 1 | 2;
  alarm: Alarm;
  /** What it means, in one sentence, for a banner or a report header. */
  sentence: string;
  /** What to do, in one sentence; `schema` names the installation in SQL the operator can paste. */
  advice(schema: string, shortfall: number | null): string;
}

// Counts as every surface writes them (src/count.ts): 25,000 beside the shortfall row's 25,000, not 25000.
const plural = (n: number, one: string, many = `${one}s`) => `${formatCount(n)} ${n === 1 ? one : many}`;

/** Every verdict, in the order SQL tests them (first match wins). */
export const STATUSES = {
  not_installed: {
    exit: 2, alarm: 'attention',
    sentence: 'subagent-context is not installed in this schema.',
    advice: () => 'subagent-context is not installed in this schema. Run `subagent-context up`.',
  },
  trigger_orphaned: {
    exit: 2, alarm: 'attention',
    sentence: 'The capture trigger is still on task_session_messages but the rest of subagent-context is gone: every subagent write warns.',
    advice: () => 'the capture trigger is still on task_session_messages, but the functions or the table it writes are gone, so every ' +
      'subagent write warns. Run `subagent-context uninstall` to remove what is left, or `subagent-context up` to install again.',
  },
  trigger_missing: {
    exit: 2, alarm: 'attention',
    sentence: 'The capture trigger is missing: new subagents are not recorded.',
    advice: () => 'the capture trigger is not installed: new subagents are not recorded. Run `subagent-context up`.',
  },
  trigger_disabled: {
    exit: 2, alarm: 'attention',
    sentence: 'The capture trigger is disabled: new subagents are not recorded.',
    advice: (schema) => 'the capture trigger exists but does not fire: new subagents are not recorded. Run ' +
      `\`ALTER TABLE ${quoteIdent(schema)}.task_session_messages ENABLE TRIGGER subagent_context_capture;\`, then \`subagent-context repair\`.`,
  },
  not_activated: {
    exit: 2, alarm: 'attention',
    sentence: 'There is no capture_since to check against.',
    advice: () => 'the activation keys are missing, so there is no "captured since" to check against. ' +
      'Run `subagent-context backfill` (or `up`).',
  },
  shortfall: {
    exit: 1, alarm: 'alarm',
    sentence: 'Subagents written since activation have no row. Run `subagent-context repair`; see docs/health.md.',
    advice: (_schema, shortfall) => `${plural(shortfall ?? 0, 'subagent')} written since activation ${shortfall === 1 ? 'has' : 'have'} no row. ` +
      'Find why (trigger state, failures below), then run `subagent-context repair`. See docs/health.md.',
  },
  stale: {
    exit: 1, alarm: 'alarm',
    sentence: 'Capture failures are recorded and not replayed yet: their rows may be missing or out of date. Run `subagent-context repair`.',
    advice: (schema) => 'capture failed on some subagent writes since activation and `repair` has not replayed them yet, so their ' +
      `rows may be missing or out of date (SELECT * FROM ${quoteIdent(schema)}.subagent_context_failures WHERE replayed_at IS NULL). ` +
      'Run `subagent-context repair`. See docs/health.md.',
  },
  behind: {
    exit: 1, alarm: 'behind',
    sentence: 'Nothing found missing so far, but subagent messages written since the last comparison are not compared yet: the check is behind, not capture.',
    advice: () => 'nothing found missing so far, but subagent messages written since the last comparison are not compared yet ' +
      '(uncompared below). The background comparison catches up by itself (every health call and the metrics exporter advance it); ' +
      '`subagent-context health --full` compares everything now, and `subagent-context repair` compares and stores what is missing. See docs/health.md.',
  },
  idle: {
    exit: 0, alarm: 'ok',
    sentence: 'Activated; no subagent has been written since.',
    advice: () => 'activated; no subagent message has been written since activation, so nothing to compare yet.',
  },
  healthy: {
    exit: 0, alarm: 'ok',
    sentence: 'Every subagent message written since activation has its row.',
    advice: () => 'every subagent message written since activation has its row.',
  },
} as const satisfies Record<string, StatusFacts>;

export type HealthStatus = keyof typeof STATUSES;

/** The verdicts, in SQL's order. */
export const HEALTH_STATUSES = Object.keys(STATUSES) as HealthStatus[];

export function statusFacts(status: string): StatusFacts | undefined {
  return (STATUSES as Record<string, StatusFacts>)[status];
}

/** The CLI's exit status for a verdict: 0 healthy or idle, 1 shortfall, stale or behind, 2 capture off or not set up. */
export function exitCodeFor(status: HealthStatus): 0 | 1 | 2 {
  return STATUSES[status].exit;
}
