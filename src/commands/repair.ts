import type { Command } from './types.js';
import { assertWritable, withClient } from '../db.js';
import { cancelOnInterrupt } from '../interrupt.js';
import { quoteIdent } from '#sql';
import { readHealth } from '../health.js';
import { exitCodeFor, STATUSES } from '../status.js';
import { printJson, yellow } from '../output.js';

export const repairCommand: Command = {
  name: 'repair',
  summary: 're-derive the rows the shortfall lists as missing, from message history',
  usage: `subagent-context repair [--database-url URL] [--schema S] [--json]

Stores, for every subagent the health shortfall counts as missing, the row derived from its newest
message (source 'backfill', under the message's metadata.agent_execution_id, else 'unknown'). Rows that exist are never touched. Then reads the
shortfall again and says what, if anything, is still missing (see docs/health.md).

--json prints {"repaired": N, "shortfall": M, "status": S}: rows stored, the shortfall afterwards, and
health's status (a disabled trigger is still trigger_disabled: repair stores rows, it does not turn
capture back on).

Example:
  subagent-context health; [ $? -eq 1 ] && subagent-context repair   # only on a shortfall (exit 1)`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await assertWritable(client);
      // In batches, each its own short transaction, so that a live write of a key being repaired waits
      // at most one batch (docs/reliability.md); a batch that stores nothing ends it (what is left cannot
      // be repaired: see below).
      const repaired = await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: async () => 'repair stopped: the batches that had committed keep their rows, the one running was rolled back; ' +
          'run `subagent-context repair` again to store the rest.',
      }, async () => {
        let total = 0;
        for (;;) {
          const { rows: [batch] } = await client.query(
            `SELECT repaired::float8 AS repaired, remaining::float8 AS remaining FROM ${quoteIdent(ctx.schema)}.subagent_context_repair()`);
          total += batch.repaired;
          if (batch.repaired === 0 || batch.remaining === 0) return total;
        }
      });
      const health = await readHealth(client, ctx.schema);
      const shortfall = health.shortfall ?? 0;
      if (ctx.json) printJson({ repaired, shortfall, status: health.status });
      else {
        console.log(`repaired ${repaired} missing row${repaired === 1 ? '' : 's'}; shortfall now ${shortfall}`);
        // Stored rows do not turn capture back on: with the trigger disabled, every new subagent is missed again.
        if (exitCodeFor(health.status) === 2) {
          console.log(yellow(`health is still ${health.status} (exit 2): ${STATUSES[health.status].advice(ctx.schema, shortfall)}`));
        }
        // A key can stay missing when a row for the same session and tool call already exists under
        // execution 'unknown' but was observed before capture_since (a tool_call_id reused after
        // activation): repair never touches an existing row.
        if (shortfall > 0) {
          console.log(yellow(`${shortfall} still missing: a row for the same session and tool call exists, observed ` +
            'before capture_since (a reused tool_call_id), or they were written after this repair. See docs/health.md.'));
        }
      }
      return 0;
    });
  },
};
