import type { Command } from './types.js';
import { withClient } from '../db.js';
import { healthReport } from '../health.js';
import { printJson, keyValues, bold, green, red, yellow, safe } from '../output.js';
import { PACKAGE_VERSION, quoteIdent } from '#sql';
import { STATUSES } from '../status.js';

export const healthCommand: Command = {
  name: 'health',
  summary: 'is capture complete since activation? exit 0 healthy/idle, 1 shortfall, 2 not activated or trigger off, 3 error',
  usage: `subagent-context health [--database-url URL] [--schema S] [--json]

Compares the subagent messages written since activation (the capture_since key) with the rows
captured since then. Read-only.

Exit status:
  0  healthy, or idle (activated, no subagent message since then); excess alone is never an alarm
  1  shortfall: a subagent message since activation has no row; run \`subagent-context repair\`
  2  not installed, not activated, or the capture trigger is missing or disabled
  3  could not check: unreachable, login refused, missing privilege, bad arguments (never 0, 1 or 2)

The status word is subagent_context_health()'s status column, the one verdict that the report, the
metrics and the dashboard also show: healthy, idle, shortfall, not_activated, trigger_missing,
trigger_disabled, not_installed.

--json prints one object: status, installed_version, package_version, activated, capture_since, backfill_through, shortfall, excess,
last_observed_at, trigger_enabled, failures, collisions, stats. See docs/health.md.

Examples:
  subagent-context health
  subagent-context health --json | jq .shortfall
  subagent-context health || subagent-context repair`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      const report = await healthReport(client, ctx.schema);
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
      if (status === 'not_installed') return exitCode;
      const n = (v: number | null) => (v === null ? 'not measured (not activated)' : String(v));
      const key = (v: string | null, empty: string) => (v === null ? '(absent)' : v === '' ? empty : v);
      console.log();
      console.log(keyValues([
        ['shortfall', health.shortfall === null ? n(null)
          : `${health.shortfall}${health.shortfall > 0 ? '  <- subagent messages since activation with no row: the only alarm' : ''}`],
        ['excess', health.excess === null ? n(null)
          : `${health.excess}${health.excess > 0 ? '  (rows with no subagent message since activation; informational)' : ''}`],
        ['last observed', safe(health.last_observed_at ?? (health.activated ? 'none since activation' : '-'))],
        ['capture_since', safe(key(health.capture_since, "'' (unreadable)"))],
        ['backfill_through', safe(key(health.backfill_through, "'' (no history to backfill)"))],
        ['trigger', status === 'trigger_missing' ? 'MISSING' : health.trigger_enabled ? 'installed, enabled' : 'installed, DISABLED'],
        ['failures', health.failures === null ? n(null)
          : `${health.failures}${health.failures > 0 ? ` since activation (SELECT * FROM ${quoteIdent(ctx.schema)}.subagent_context_failures ORDER BY occurred_at DESC)` : ''}`],
        ['collisions', `${health.collisions}${(health.collisions ?? 0) > 0 ? ' rows share a (session, tool call) with a row of another execution' : ''}`],
        ['version', `installed ${safe(health.installed_version ?? 'unknown')}, package ${PACKAGE_VERSION}` +
          (report.upgradeAvailable ? ': the package is newer than the installation, run `subagent-context up`' : '')],
        ['stats', stats === null ? '-' : `attempted ${stats.attempted}, persisted ${stats.persisted}, skipped (no identity) ${stats.skipped_no_identity}, failed ${stats.failed}, anomalous ${stats.anomalous_value}, unknown execution ${stats.unknown_execution} (since install, not transactional)`],
      ]));
      return exitCode;
    });
  },
};
