import type { Command } from './types.js';
import { assertWritable, takeNotices, withClient } from '../db.js';
import { cancelOnInterrupt, describeInstallState } from '../interrupt.js';
import { failIfBackfillFailed, up } from '../install.js';
import { printJson, green, safe, yellow } from '../output.js';
import { backfillSummary } from './backfill.js';
import { sameRelease } from '../installed.js';

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
      // Any earlier release is upgraded in place; a newer one is refused in one sentence, before anything is written.
      await sameRelease(client, ctx.schema, 'older');
      await assertWritable(client);
      const result = await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: (admin) => describeInstallState(admin, ctx.schema, 'subagent-context up'),
      }, () => up(client, ctx.schema, { progress: ctx.json ? undefined : process.stderr }));
      const notices = aboutAdoption(takeNotices(client));
      if (ctx.json) printJson({ ...result, notices });
      else {
        console.log(result.applied.length ? `applied migrations: ${result.applied.join(', ')}` : 'migrations: up to date');
        for (const notice of notices) console.log(yellow(`note: ${safe(notice)}`));
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

/**
 * Adopting kandev's own table (sql/table.sql says so, once per migration that applies the data layer)
 * means two writers unless kandev's is turned off: said once, with what it means.
 */
function aboutAdoption(notices: string[]): string[] {
  const adopted = (n: string) => n.startsWith('adopted the existing task_session_subagents');
  const first = notices.find(adopted);
  return notices.filter((n) => !adopted(n) || n === first).map((n) => (adopted(n)
    ? `${n}. kandev >= 0.89 writes that table too, from its own process: while both write, every subagent is ` +
      'recorded twice, once per execution id. Use one writer (docs/install.md)'
    : n));
}
