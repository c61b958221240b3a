import type pg from 'pg';
import type { Command } from './types.js';
import { assertWritable, inStep, withClient } from '../db.js';
import { cancelOnInterrupt } from '../interrupt.js';
import { quoteIdent } from '#sql';
import { readHealth } from '../health.js';
import { sameRelease } from '../installed.js';
import { exitCodeFor, STATUSES } from '../status.js';
import { formatCount, printJson, step, yellow } from '../output.js';

export const repairCommand: Command = {
  name: 'repair',
  summary: 're-derive the rows the shortfall lists as missing, and replay failed captures, from message history',
  usage: `subagent-context repair [--database-url URL] [--schema S] [--json]

Replays every capture failure recorded since activation (subagent_context_failures): the row is derived
again from the message as it is now and merged into its row, as capture would have. Then stores, for every
subagent the health shortfall counts as missing, the row derived from its newest message (source 'backfill',
under the message's metadata.agent_execution_id, else 'unknown'). Rows of other subagents are never touched.
In batches, each a short transaction; then reads the shortfall again and says what, if anything, is still
missing (see docs/health.md).

--json prints {"repaired": N, "replayed": R, "shortfall": M, "status": S}: rows stored, failures replayed,
the shortfall afterwards, and health's status (a disabled trigger is still trigger_disabled: repair stores
rows, it does not turn capture back on).

Example:
  subagent-context health; [ $? -eq 1 ] && subagent-context repair   # only on a shortfall (exit 1)`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await sameRelease(client, ctx.schema);
      await assertWritable(client);
      const done = { repaired: 0, replayed: 0, held: 0, unreplayed: 0 };
      await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: async () => `repair stopped: ${formatCount(done.repaired)} missing row${done.repaired === 1 ? '' : 's'} stored and ` +
          `${formatCount(done.replayed)} failed capture${done.replayed === 1 ? '' : 's'} replayed in the batches that had committed ` +
          '(the one running was rolled back); run `subagent-context repair` again to do the rest.',
      }, () => repair(client, ctx.schema, done, ctx.json ? undefined : process.stderr));
      const health = await readHealth(client, ctx.schema);
      const shortfall = health.shortfall ?? 0;
      if (ctx.json) printJson({ repaired: done.repaired, replayed: done.replayed, shortfall, status: health.status });
      else {
        const replayed = done.replayed ? `, replayed ${formatCount(done.replayed)} failed capture${done.replayed === 1 ? '' : 's'}` : '';
        console.log(`repaired ${formatCount(done.repaired)} missing row${done.repaired === 1 ? '' : 's'}${replayed}; ` +
          `shortfall now ${formatCount(shortfall)}`);
        if (done.held + done.unreplayed > 0) {
          console.log(yellow(`${formatCount(done.held + done.unreplayed)} could not be written now: a transaction that is still open ` +
            'holds their rows, or the write failed again (subagent_context_failures says why); run `subagent-context repair` again later.'));
        }
        // Stored rows do not turn capture back on: with the trigger disabled, every new subagent is missed again.
        if (exitCodeFor(health.status) === 2) {
          console.log(yellow(`health is still ${health.status} (exit 2): ${STATUSES[health.status].advice(ctx.schema, shortfall)}`));
        }
        // A key can stay missing when a row for the same session and tool call exists under execution
        // 'unknown' but was observed before capture_since (a tool_call_id reused after activation): repair
        // never touches an existing row.
        if (shortfall > 0) {
          console.log(yellow(`${formatCount(shortfall)} still missing: a row for the same session and tool call exists, observed ` +
            'before capture_since (a reused tool_call_id), or they were written after this repair. See docs/health.md.'));
        }
      }
      return 0;
    });
  },
};

interface Done { repaired: number; replayed: number; held: number; unreplayed: number }

/** Failed captures replayed, then missing keys stored, batch after batch (each its own transaction), counting into `done`. */
async function repair(client: pg.Client, schema: string, done: Done, stream?: NodeJS.WriteStream): Promise<void> {
  const s = quoteIdent(schema);
  let cursor: unknown[] = [null, null];
  for (;;) {
    const { rows: [b] } = await inStep(client, () => client.query(
      `SELECT replayed::float8 AS replayed, unreplayed::float8 AS unreplayed, next_occurred_at::text, next_id::text, more
         FROM ${s}.subagent_context_replay_failures($1::timestamp, $2::bigint)`, cursor));
    done.replayed += b.replayed;
    done.unreplayed += b.unreplayed;
    if (!b.more) break;
    cursor = [b.next_occurred_at, b.next_id];
  }
  const shown = stream?.isTTY ? step('repair: storing the missing rows', { stream, quiet: true }) : undefined;
  cursor = [null, null];
  let total = 0;
  try {
    for (;;) {
      const { rows: [b] } = await inStep(client, () => client.query(
        `SELECT repaired::float8 AS repaired, held::float8 AS held, pending::float8 AS pending, next_created_at::text, next_key, more
           FROM ${s}.subagent_context_repair($1::timestamp, $2::text)`, cursor));
      done.repaired += b.repaired;
      done.held += b.held;
      if (b.pending !== null) total = done.repaired + done.held + b.pending;  // counted by the first batch only
      shown?.update(done.repaired + done.held, total);
      if (!b.more) break;
      cursor = [b.next_created_at, b.next_key];
    }
    shown?.clear();
  } catch (err) {
    shown?.fail();
    throw err;
  }
}
