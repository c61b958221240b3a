import type { Command } from './types.js';
import { withClient } from '../db.js';
import { readHealth, readStats, triggerInstalled, verdict } from '../health.js';
import { printJson, keyValues, bold, green, red, yellow } from '../output.js';

export const healthCommand: Command = {
  name: 'health',
  summary: 'is capture complete since activation? exit 0 healthy/idle, 1 shortfall, 2 not activated or trigger off',
  usage: `subagent-context health [--database-url URL] [--schema S] [--json]

Compares qualifying messages written since activation with the rows captured since then.
Exit status: 0 healthy or idle, 1 shortfall (a subagent was missed: run \`subagent-context repair\`),
2 not activated, or the capture trigger is missing or disabled.

Examples:
  subagent-context health
  subagent-context health --json | jq .shortfall`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      const installed = await triggerInstalled(client, ctx.schema);
      const health = await readHealth(client, ctx.schema);
      const stats = await readStats(client, ctx.schema);
      const { status, exitCode } = verdict(health, installed);
      if (ctx.json) {
        printJson({ status, ...health, stats });
        return exitCode;
      }
      const word = exitCode === 0 ? green(status) : exitCode === 1 ? red(status) : yellow(status);
      console.log(`${bold('subagent-context health')}: ${word}`);
      const n = (v: number | null) => (v === null ? '-' : String(v));
      console.log(keyValues([
        ['shortfall', `${n(health.shortfall)}${(health.shortfall ?? 0) > 0 ? '  <- missed subagents: run `subagent-context repair`' : ''}`],
        ['excess', n(health.excess)],
        ['last observed', health.last_observed_at ?? (health.activated ? 'nothing captured since activation' : '-')],
        ['capture_since', health.capture_since ?? '(absent)'],
        ['backfill_through', health.backfill_through === '' ? "'' (no history)" : health.backfill_through ?? '(absent)'],
        ['trigger', installed ? (health.trigger_enabled ? 'installed, enabled' : 'installed, DISABLED') : 'MISSING'],
        ['failures', n(health.failures)],
        ['collisions', n(health.collisions)],
        ['stats', `attempted ${stats.attempted}, persisted ${stats.persisted}, skipped ${stats.skipped_no_identity}, failed ${stats.failed}, anomalous ${stats.anomalous_value}, unknown execution ${stats.unknown_execution}`],
      ]));
      return exitCode;
    });
  },
};
