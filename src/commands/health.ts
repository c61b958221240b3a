import type { Command, CommandContext } from './types.js';
import { inStep, isSessionEnded, sessionEndedSentence, withClient, type Client } from '../db.js';
import { UserError } from '../errors.js';
import { healthReport, healthTarget, type HealthReport, type Stats } from '../health.js';
import { OtherRelease } from '../installed.js';
import { cancelOnInterrupt } from '../interrupt.js';
import { reconcileAll, reconcileFor, SHORT_STEP_MESSAGES } from '../reconcile.js';
import { holdersSentence } from '../holders.js';
import { printJson, keyValues, bold, formatCount, green, red, yellow, safe } from '../output.js';
import { PACKAGE_VERSION, quoteIdent } from '#sql';
import { HEALTH_STATUSES, STATUSES } from '../status.js';

export const healthCommand: Command = {
  name: 'health',
  summary: 'is capture complete since activation? exit 0 healthy/idle, 1 shortfall/stale/behind, 2 not activated or trigger off, 3 error',
  usage: `subagent-context health [--database-url URL] [--schema S] [--json] [--full]

Compares the subagent messages written since activation (the capture_since key) with the rows
captured since then. Its cost is bounded whatever happened (docs/health.md#bounded-in-every-state): the
reconciliation (a full comparison kept in the database, in bounded steps) records what it compared and
the missing keys it found; health counts those, checks the newest of them again, compares the newest
messages written since, and counts (uncompared) what it did not compare. It writes nothing. After
answering, it gives the reconciliation a few tenths of a second of work on a server that can write, so a
regular health check helps keep it current (the metrics exporter does the most).

Options:
  --full   compare everything written up to now first: a complete reconciliation from the start
           (progress on a terminal; Ctrl-C stops it cleanly), then answer

Exit status:
  0  healthy, or idle (activated, no subagent message since then); excess alone is never an alarm
  1  shortfall: a subagent message since activation has no row; run \`subagent-context repair\`;
     stale: capture failures not replayed yet (repair replays them); behind: nothing missing found
     so far, but messages written since the last comparison are not compared yet (uncompared)
  2  not installed, not activated, or the capture trigger is missing or disabled
  3  could not check: unreachable, login refused, missing privilege, bad arguments, or another release
     is installed (run \`subagent-context up\`; --json: status upgrade_required); never 0, 1 or 2

The status word is subagent_context_health()'s status column, the one verdict that the report, the
metrics and the dashboard also show: ${HEALTH_STATUSES.join(', ')}.

--json prints one object: status, installed_version, activated, capture_since, backfill_through,
shortfall, excess, last_observed_at, trigger_enabled, failures, collisions, reconciled_at, uncompared, stats,
upgrade_available. See docs/health.md.

Examples:
  subagent-context health
  subagent-context health --json | jq .shortfall
  subagent-context health --full
  subagent-context health; [ $? -eq 1 ] && subagent-context repair   # repair on a shortfall only`,
  options: { full: { type: 'boolean' } },
  jsonErrors: true,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      const installed = await healthTarget(client, ctx.schema).catch((err) => otherRelease(err, ctx));
      if (ctx.args.full && installed?.health) await fullReconciliation(client, ctx);
      const report = await boundedHealthReport(client, ctx, installed);
      try {
        return answer(report, ctx);
      } finally {
        // Background work for the next call, after the verdict is out, in small steps so that the command
        // still ends within a second; its faults are not this check's.
        if (report.health.activated && !ctx.args.full) {
          await reconcileFor(client, ctx.schema, { batchMessages: SHORT_STEP_MESSAGES }).catch(() => null);
        }
      }
    });
  },
};

/**
 * Another release installed (the upgrade window, docs/upgrade.md): --json still prints one object, with
 * the status `upgrade_required`; the sentence goes to stderr and the exit status is 3, as for any check
 * that could not be made.
 */
function otherRelease(err: unknown, ctx: CommandContext): never {
  if (err instanceof OtherRelease && ctx.json) {
    printJson({ status: 'upgrade_required', installed_version: err.installed, package_version: PACKAGE_VERSION, error: err.message });
  }
  throw err;
}

async function fullReconciliation(client: Client, ctx: CommandContext): Promise<void> {
  const last = await cancelOnInterrupt(client, ctx.databaseUrl!, {
    // A later --full compares from the start again: what was written behind this run's position since it
    // started is what it must not miss (docs/health.md#reconciliation). Health's background steps go on.
    describe: async () => 'the reconciliation stopped after its last completed step; what it compared is kept and the next ' +
      'health checks continue it in the background; `subagent-context health --full` again compares everything from the start.',
  }, () => reconcileAll(client, ctx.schema, { stream: ctx.json ? undefined : process.stderr, now: true })).catch((err: unknown) => {
    // Ended from outside (pg_terminate_backend, a restart): the same facts as an interrupt, and the next step.
    if (isSessionEnded(err)) {
      throw new UserError(sessionEndedSentence(String((err as Error).message), 'every step the reconciliation completed is kept and the ' +
        'next health checks continue it; `subagent-context health --full` again, once the server accepts connections, compares ' +
        'everything from the start'));
    }
    throw err;
  });
  if (last.status === 'read_only') {
    console.error('health --full: this server is read-only (a standby): it cannot run a reconciliation; the answer below is ' +
      'what the primary last recorded. Run `subagent-context health --full` against the primary.');
  } else if (last.status === 'busy') {
    console.error('health --full: another session is reconciling this schema right now; the answer below is from its last completed run.');
  }
}

/** How long health's read may take: it costs milliseconds (sql/code/health.sql), so this is only ever a server held up. */
export const HEALTH_TIMEOUT_MS = 10_000;

/**
 * The health report under a statement_timeout of its own transaction; past it, one sentence says who holds
 * it up (src/holders.ts) and the exit status is 3 (could not check).
 */
async function boundedHealthReport(client: Client, ctx: CommandContext, installed: Awaited<ReturnType<typeof healthTarget>>): Promise<HealthReport> {
  try {
    return await inStep(client, () => healthReport(client, ctx.schema, installed), { statement_timeout: `${HEALTH_TIMEOUT_MS}ms` });
  } catch (err) {
    if ((err as { code?: string }).code !== '57014') throw err;
    throw new UserError(`health did not answer within ${HEALTH_TIMEOUT_MS / 1000} s and was cancelled` +
      `${await holdersSentence(ctx.databaseUrl!, ctx.schema)}.`);
  }
}

function answer(report: HealthReport, ctx: CommandContext): number {
  const { status, exitCode, health, stats } = report;
  if (ctx.json) {
    printJson({ ...health, stats, upgrade_available: report.upgradeAvailable });
    return exitCode;
  }
  // Escaped before it is painted: safe() after the colour would show the colour codes as text.
  const shown = safe(status);
  const word = exitCode === 0 ? green(shown) : exitCode === 1 ? red(shown) : yellow(shown);
  console.log(`${bold('subagent-context health')} (schema ${safe(ctx.schema)}): ${word}`);
  console.log(`  ${STATUSES[status].advice(ctx.schema, health.shortfall)}`);
  if (status === 'not_installed' || status === 'trigger_orphaned') return exitCode;
  const n = (v: number | null) => (v === null ? 'not measured (not activated)' : formatCount(v));
  const key = (v: string | null, empty: string) => (v === null ? '(absent)' : v === '' ? empty : v);
  console.log();
  console.log(keyValues([
    ['shortfall', health.shortfall === null ? n(null)
      : `${formatCount(health.shortfall)}${health.shortfall > 0 ? '  <- subagent messages since activation with no row: the only alarm' : ''}`],
    ['excess', health.excess === null ? n(null)
      : `${formatCount(health.excess)}${health.excess > 0 ? '  (rows with no subagent message since activation; informational)' : ''}`],
    ['last observed', safe(health.last_observed_at ?? (health.activated ? 'none since activation' : '-'))],
    ['capture_since', safe(key(health.capture_since, "'' (unreadable)"))],
    ['backfill_through', safe(key(health.backfill_through, "'' (no history to backfill)"))],
    ['trigger', status === 'trigger_missing' ? 'MISSING' : health.trigger_enabled ? 'installed, enabled' : 'installed, DISABLED'],
    ['failures', health.failures === null ? n(null)
      : `${formatCount(health.failures)}${health.failures > 0 ? ` since activation (SELECT * FROM ${quoteIdent(ctx.schema)}.subagent_context_failures ORDER BY occurred_at DESC)` : ''}`],
    ['uncompared', health.uncompared === null ? n(null)
      : health.uncompared > 0 ? `${formatCount(health.uncompared)}  <- subagent messages written since the last comparison not compared yet ` +
        '(the background comparison catches up; `health --full` compares them now)' : '0'],
    ['reconciled', health.reconciled_at === null ? (health.activated ? 'no complete reconciliation yet (run `subagent-context health --full`)' : '-')
      : `${safe(health.reconciled_at)} (history before it compared then; only later writes compared now)`],
    ['collisions', `${formatCount(health.collisions ?? 0)}${(health.collisions ?? 0) > 0 ? ' rows share a (session, tool call) with a row of another execution' : ''}`],
    ['version', `installed ${safe(health.installed_version ?? 'unknown')}, package ${PACKAGE_VERSION}` +
      (report.upgradeAvailable ? ': the code installed is another build of this release or for another PostgreSQL major, run `subagent-context up`' : '')],
    ['stats', stats === null ? '-' : `${statsLine(stats)} (since install, not transactional)`],
  ]));
  return exitCode;
}

/** The capture counters in one line, as `health` and the demo print them. */
export function statsLine(stats: Stats): string {
  return `attempted ${formatCount(stats.attempted)}, persisted ${formatCount(stats.persisted)}, ` +
    `skipped (no identity) ${formatCount(stats.skipped_no_identity)}, failed ${formatCount(stats.failed)}, ` +
    `anomalous ${formatCount(stats.anomalous_value)}, unknown execution ${formatCount(stats.unknown_execution)}`;
}
