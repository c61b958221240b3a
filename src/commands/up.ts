import type { Command } from './types.js';
import { assertWritable, takeNotices, withClient, type Client } from '../db.js';
import { quoteIdent } from '#sql';
import { cancelOnInterrupt, describeInstallState } from '../interrupt.js';
import { failIfBackfillFailed, up } from '../install.js';
import { printJson, green, safe, yellow } from '../output.js';
import { backfillSummary } from './backfill.js';
import { sameRelease } from '../installed.js';
import { assertInstaller } from '../owner.js';

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
      await assertInstaller(client, ctx.schema, 'up');
      const result = await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: (admin) => describeInstallState(admin, ctx.schema, 'subagent-context up'),
      }, () => up(client, ctx.schema, { progress: ctx.json ? undefined : process.stderr }));
      const notices = aboutAdoption(takeNotices(client), await topologyOf(client, ctx.schema));
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

/** Where the installation runs: 'plain', 'partitioned' or 'citus' (sql/citus.sql). */
async function topologyOf(client: Client, schema: string): Promise<string> {
  return (await client.query(`SELECT ${quoteIdent(schema)}.subagent_context_topology() AS topology`)).rows[0].topology;
}

/**
 * Adopting an existing task_session_subagents is said once (sql/data/table.sql says so once per migration that
 * applies the data layer; the first says what it widened). Where kandev made that table (kandev >= 0.89
 * does, on a plain server), adopting it means two writers unless kandev's is turned off: said with it. On
 * Citus the operator made it, distributed, before `up` (docs/citus.md, step 2): nothing to say about its
 * writers, and nothing at all unless its metrics were widened.
 */
function aboutAdoption(notices: string[], topology: string): string[] {
  const adopted = (n: string) => n.startsWith('adopted the existing task_session_subagents');
  const first = notices.findIndex(adopted);
  return notices.flatMap((n, i) => {
    if (!adopted(n)) return [n];
    if (i !== first) return [];
    if (topology === 'citus') return n.includes('widened') ? [n] : [];
    return [`${n}. kandev >= 0.89 writes that table too, from its own process: while both write, every subagent is ` +
      'recorded twice, once per execution id. Use one writer (docs/install.md)'];
  });
}
