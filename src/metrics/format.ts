// What one evaluation looks like to Prometheus (text exposition format 0.0.4) and to `metrics --once --json`.
import { PACKAGE_VERSION } from '#sql';
import { safe } from '../output.js';
import { HEALTH_STATUSES } from '../status.js';
import type { Evaluation } from './evaluate.js';

interface MetricDef { name: string; help: string; type: 'gauge' | 'counter'; column?: string }

/** health's status values (docs/health.md), exported as a state set: one series per value, 1 for the current one. */
export const STATUS_VALUES = HEALTH_STATUSES;

// Label values are shown safe() first: `metrics --once` on a terminal must not pass control characters
// through (an installed_version or a schema name is text from the database). safe() writes them as
// \x1b, whose backslash the format's own escaping then doubles, so Prometheus reads the text "\x1b".
const labelValue = (v: string) => `"${safe(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/** Every metric `metrics` can export, in order, with its type and help (also what `metrics --help` lists). */
export const METRICS: MetricDef[] = [
  { name: 'subagent_context_up', type: 'gauge', help: '1 when the database answered this scrape and what is installed could be read (nothing installed counts), else 0.' },
  { name: 'subagent_context_slow', type: 'gauge', help: 'When subagent_context_up is 0: 1 when the database answered but health did not finish within --timeout-seconds (slow, not down: the scrape error names who holds it up), else 0. Absent when the database could not be asked.' },
  { name: 'subagent_context_evaluation_seconds', type: 'gauge', help: 'How long the evaluation served took (health and the counters), in seconds, whether or not it finished: how slow the check is, beside subagent_context_up.' },
  { name: 'subagent_context_evaluation_age_seconds', type: 'gauge', help: 'How old the evaluation served is, in seconds (a cached one is reused for --cache-seconds).' },
  { name: 'subagent_context_permission_denied', type: 'gauge', help: "1 when the database answered but refused the exporter's role a privilege it needs (the scrape error names the GRANT), 0 when the scrape could read; absent when the database could not be asked." },
  { name: 'subagent_context_status', type: 'gauge', help: "Health's one verdict (subagent_context_health().status, or not_installed / trigger_orphaned when there is no installation to ask): 1 for the current value of the status label, 0 for the others. Absent when the installed release is too old to say." },
  { name: 'subagent_context_upgrade_required', type: 'gauge', help: 'Installations only: 1 when the installed release is not this exporter\'s (or was built for another PostgreSQL major): run `subagent-context up`.' },
  { name: 'subagent_context_info', type: 'gauge', help: 'Always 1; the labels carry the installed release (installed_version, empty when none) and the exporter\'s (package_version).' },
  { name: 'subagent_context_activated', type: 'gauge', help: '1 when the activation key capture_since is present.', column: 'activated' },
  { name: 'subagent_context_trigger_installed', type: 'gauge', help: '1 when the capture trigger exists on task_session_messages.', column: 'trigger_installed' },
  { name: 'subagent_context_trigger_enabled', type: 'gauge', help: '1 when the capture trigger fires in normal sessions (enabled ORIGIN or ALWAYS).', column: 'trigger_enabled' },
  { name: 'subagent_context_shortfall', type: 'gauge', help: 'Subagents written since activation that have no row: the only alarm. Absent before activation.', column: 'shortfall' },
  { name: 'subagent_context_excess', type: 'gauge', help: 'Rows observed since activation without a qualifying message: reported, never an alarm.', column: 'excess' },
  { name: 'subagent_context_last_observed_timestamp_seconds', type: 'gauge', help: 'Unix time of the newest row observed since activation. Absent when none.', column: 'last_observed_seconds' },
  { name: 'subagent_context_last_subagent_message_timestamp_seconds', type: 'gauge', help: 'Unix time of the newest subagent message created since activation. Absent when none.', column: 'last_message_seconds' },
  { name: 'subagent_context_uncompared', type: 'gauge', help: 'Subagent messages written since the last comparison that health has not compared yet (counted up to a cap: the cap means at least). Above 0, the status is behind unless something worse; the background comparison catches up. Absent before activation.', column: 'uncompared' },
  { name: 'subagent_context_reconciled_timestamp_seconds', type: 'gauge', help: "Unix time health's newest complete reconciliation started (reconciled_at): the full comparison covers every message before it. Absent when none.", column: 'reconciled_seconds' },
  { name: 'subagent_context_capture_since_timestamp_seconds', type: 'gauge', help: 'Unix time of activation (the capture_since key). Absent before activation.', column: 'capture_since_seconds' },
  { name: 'subagent_context_failures', type: 'gauge', help: 'Capture failures recorded since activation that repair has not replayed yet.', column: 'failures' },
  { name: 'subagent_context_collisions', type: 'gauge', help: 'Rows whose (session, tool call) is shared with a row of another execution.', column: 'collisions' },
  { name: 'subagent_context_attempted_total', type: 'counter', help: 'Qualifying message writes seen by the capture trigger.', column: 'attempted' },
  { name: 'subagent_context_skipped_no_identity_total', type: 'counter', help: 'Qualifying writes skipped for lack of session, task or tool call id.', column: 'skipped_no_identity' },
  { name: 'subagent_context_persisted_total', type: 'counter', help: 'Qualifying writes whose upsert succeeded.', column: 'persisted' },
  { name: 'subagent_context_failed_total', type: 'counter', help: 'Qualifying writes whose upsert failed (caught; the message write went on).', column: 'failed' },
  { name: 'subagent_context_anomalous_value_total', type: 'counter', help: 'Writes with a negative or malformed metric.', column: 'anomalous_value' },
  { name: 'subagent_context_unknown_execution_total', type: 'counter', help: "Persisted writes stored under execution 'unknown'.", column: 'unknown_execution' },
];

type Sample = { labels: Record<string, string>; value: number };

/** The clock the evaluation's age is read against (a test may fix it). */
let now = () => Date.now();
export function setClock(clock: () => number): void { now = clock; }

const numberOf = (v: unknown): number | null =>
  (v === null || v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : Number(v));

/**
 * The samples of one metric for one evaluation; an empty list leaves the metric out. An unknown value (the
 * shortfall before activation, anything while the database is down) is left out, never reported as 0.
 */
function samplesOf(m: MetricDef, e: Evaluation, packageVersion: string): Sample[] {
  if (m.name === 'subagent_context_up') return [{ labels: {}, value: e.up ? 1 : 0 }];
  if (m.name === 'subagent_context_permission_denied') return e.up || e.permissionDenied ? [{ labels: {}, value: e.up ? 0 : 1 }] : [];
  if (m.name === 'subagent_context_slow') return e.up || e.slow || e.permissionDenied ? [{ labels: {}, value: e.slow ? 1 : 0 }] : [];
  if (m.name === 'subagent_context_evaluation_seconds') return e.durationMs === undefined ? [] : [{ labels: {}, value: e.durationMs / 1000 }];
  if (m.name === 'subagent_context_evaluation_age_seconds') return [{ labels: {}, value: Math.max(0, (now() - e.finishedAt) / 1000) }];
  if (!e.up) return [];
  switch (m.name) {
    case 'subagent_context_status':
      return e.status === null ? [] : STATUS_VALUES.map((v) => ({ labels: { status: v }, value: e.status === v ? 1 : 0 }));
    case 'subagent_context_upgrade_required':
      return e.upgradeRequired === null ? [] : [{ labels: {}, value: e.upgradeRequired ? 1 : 0 }];
    case 'subagent_context_info':
      return [{ labels: { installed_version: e.installedVersion ?? '', package_version: packageVersion }, value: 1 }];
    default: {
      const value = numberOf(e.row?.[m.column!]);
      return value === null || Number.isNaN(value) ? [] : [{ labels: {}, value }];
    }
  }
}

/** The Prometheus text exposition format (version 0.0.4) of one evaluation. */
export function formatMetrics(schema: string, e: Evaluation, packageVersion = PACKAGE_VERSION): string {
  const lines: string[] = [];
  // The error was scrubbed of secrets where it was made (evaluate.ts); safe() keeps control characters out.
  if (e.error) lines.push(`# scrape error: ${safe(e.error.replace(/\s+/g, ' '))}`);
  for (const m of METRICS) {
    const samples = samplesOf(m, e, packageVersion);
    if (samples.length === 0) continue;
    lines.push(`# HELP ${m.name} ${m.help}`, `# TYPE ${m.name} ${m.type}`);
    for (const x of samples) {
      const labels = Object.entries({ schema, ...x.labels }).map(([k, v]) => `${k}=${labelValue(v)}`).join(',');
      lines.push(`${m.name}{${labels}} ${x.value}`);
    }
  }
  return lines.join('\n') + '\n';
}

/**
 * The same values as one JSON object (`metrics --once --json`): one key per metric, in order; an unknown
 * value is null; the status is its current label value, the info metric its labels; `error` says why
 * `subagent_context_up` is 0.
 */
export function metricsJson(schema: string, e: Evaluation, packageVersion = PACKAGE_VERSION): Record<string, unknown> {
  const out: Record<string, unknown> = { schema };
  for (const m of METRICS) {
    const samples = samplesOf(m, e, packageVersion);
    if (m.name === 'subagent_context_status') out[m.name] = samples.find((s) => s.value === 1)?.labels.status ?? null;
    else if (m.name === 'subagent_context_info') out[m.name] = samples[0]?.labels ?? null;
    else out[m.name] = samples[0]?.value ?? null;
  }
  out.error = e.error ?? null;
  return out;
}
