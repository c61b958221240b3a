import type { Command } from './types.js';
import { assertWritable, withClient } from '../db.js';
import { cancelOnInterrupt, describeInstallState } from '../interrupt.js';
import { backfill, failIfBackfillFailed, type BackfillResult } from '../install.js';
import { printJson, formatCount, keyValues, safe } from '../output.js';
import { sameRelease } from '../installed.js';

export const backfillCommand: Command = {
  name: 'backfill',
  summary: 'run only the guarded backfill (a no-op once both activation keys exist)',
  usage: `subagent-context backfill [--database-url URL] [--schema S] [--json]

Derives rows for history written before capture was installed, then writes the activation keys
subagent_context_capture_since and subagent_context_backfill_through. Does nothing when both keys are
present; a missing key is computed and written, a present one is never rewritten.

Example:
  subagent-context backfill --database-url postgres://kandev@db/kandev`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await sameRelease(client, ctx.schema);
      await assertWritable(client);
      const result = await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: (admin) => describeInstallState(admin, ctx.schema, 'subagent-context backfill'),
      }, () => backfill(client, ctx.schema, { progress: ctx.json ? undefined : process.stderr }));
      if (ctx.json) printJson(result);
      else {
        console.log(backfillSummary(result));
      }
      failIfBackfillFailed(result);
      return 0;
    });
  },
};

/**
 * The backfill's outcome and the activation keys, as `up` and `backfill` print them. The keys are
 * read back from kandev_meta, which anything with write access to the host can fill: shown safe().
 */
export function backfillSummary(result: BackfillResult): string {
  return `backfill: ${result.status}\n` + keyValues([
    ['rows backfilled', formatCount(result.inserted) +
      (result.inserted_before ? ` (and ${formatCount(result.inserted_before)} by the interrupted run this one continued)` : '')],
    ['capture_since', safe(result.capture_since ?? '(absent)')],
    ['backfill_through', result.backfill_through === '' ? "'' (no history)" : safe(result.backfill_through ?? '(absent)')],
  ]);
}
