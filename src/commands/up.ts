import type { Command } from './types.js';
import { withClient } from '../db.js';
import { cancelOnInterrupt, describeInstallState } from '../interrupt.js';
import { failIfBackfillFailed, up } from '../install.js';
import { printJson, green, safe } from '../output.js';
import { backfillSummary } from './backfill.js';

export const upCommand: Command = {
  name: 'up',
  summary: 'install or upgrade capture (migrations), then run the guarded backfill',
  usage: `subagent-context up [--database-url URL] [--schema S] [--json]

Applies the migrations (table, derivation, trigger, health) into the schema that holds kandev's
tables, then backfills history once and writes the two activation keys. Safe to run again: nothing
changes once installed and activated; a failed backfill is retried. On a database installed by an
earlier release, or after a PostgreSQL major upgrade, it upgrades the installation in place, keeping
rows, activation keys, counters and the failure log (docs/upgrade.md).

Examples:
  subagent-context up --database-url postgres://kandev@db/kandev
  DATABASE_URL=postgres://kandev@db/kandev subagent-context up --schema tenant_a`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      const result = await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: (admin) => describeInstallState(admin, ctx.schema, 'subagent-context up'),
      }, () => up(client, ctx.schema, { progress: ctx.json ? undefined : process.stderr }));
      if (ctx.json) printJson(result);
      else {
        console.log(result.applied.length ? `applied migrations: ${result.applied.join(', ')}` : 'migrations: up to date');
        if (result.upgraded) {
          console.log(`upgraded in place: ${safe(String(result.upgraded.from))} -> ${safe(String(result.upgraded.to))} (PostgreSQL ${result.upgraded.server_major}); rows, keys and counters kept`);
        }
        console.log(backfillSummary(result.backfill));
      }
      failIfBackfillFailed(result.backfill);
      if (!ctx.json) console.log(green('installed and activated'));
      return 0;
    });
  },
};
