import type pg from 'pg';
import type { Command } from './types.js';
import { assertWritable, inStep, withClient } from '../db.js';
import { cancelOnInterrupt } from '../interrupt.js';
import { quoteIdent } from '#sql';
import { readHealth } from '../health.js';
import { sameRelease } from '../installed.js';
import { exitCodeFor, STATUSES } from '../status.js';
import { formatCount, printJson, step, yellow } from '../output.js';
import { reconcileAll } from '../reconcile.js';

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

First it compares everything written up to now (a complete reconciliation, as \`health --full\`, with
progress on a terminal), so it stores every row that \`health --full\` would find missing, back-dated ones
included. It ends with what it stored, what is still missing and why (as far as health knows), and what
was written meanwhile and is not compared yet.

--json prints {"repaired": N, "replayed": R, "compared": C, "held": H, "unreplayed": U, "shortfall": M,
"uncompared": X, "status": S}: rows stored, failures replayed, subagent messages compared first, rows a
transaction still held, failures whose write failed again, the shortfall afterwards, messages not compared
yet, and health's status (a disabled trigger is still trigger_disabled: repair stores rows, it does not
turn capture back on).

Example:
  subagent-context health; [ $? -eq 1 ] && subagent-context repair   # only on a shortfall (exit 1)`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await sameRelease(client, ctx.schema);
      await assertWritable(client);
      const done = { repaired: 0, replayed: 0, held: 0, unreplayed: 0, compared: 0 };
      const stream = ctx.json ? undefined : process.stderr;
      await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: async () => `repair stopped: ${formatCount(done.repaired)} missing row${done.repaired === 1 ? '' : 's'} stored and ` +
          `${formatCount(done.replayed)} failed capture${done.replayed === 1 ? '' : 's'} replayed in the batches that had committed ` +
          '(the one running was rolled back); run `subagent-context repair` again to do the rest.',
      }, async () => {
        // First a complete comparison of everything written up to now (health --full's), so that what
        // repair stores is everything `health --full` would find, back-dated messages included.
        const last = await reconcileAll(client, ctx.schema, { stream, now: true });
        done.compared = last.messages_compared ?? 0;
        await repair(client, ctx.schema, done, stream);
      });
      const health = await readHealth(client, ctx.schema);
      const shortfall = health.shortfall ?? 0;
      const uncompared = health.uncompared ?? 0;
      if (ctx.json) {
        printJson({ repaired: done.repaired, replayed: done.replayed, compared: done.compared, held: done.held,
          unreplayed: done.unreplayed, shortfall, uncompared, status: health.status });
      } else {
        console.log(summary(done, shortfall, uncompared));
        if (shortfall > 0) console.log(yellow(stillMissing(done, shortfall)));
        if (uncompared > 0) {
          console.log(yellow(`${formatCount(uncompared)} subagent message${uncompared === 1 ? '' : 's'} written while repair ran ` +
            '(or since) are not compared yet; the next `subagent-context health` or scrape goes on comparing them.'));
        }
        // Stored rows do not turn capture back on: with the trigger disabled, every new subagent is missed again.
        if (exitCodeFor(health.status) === 2) {
          console.log(yellow(`health is still ${health.status} (exit 2): ${STATUSES[health.status].advice(ctx.schema, shortfall)}`));
        }
      }
      return 0;
    });
  },
};

const plural = (n: number, one: string, many = `${one}s`) => `${formatCount(n)} ${n === 1 ? one : many}`;

/** What repair did and what is left, in one line: never "shortfall now 0" while something is left. */
function summary(done: Done, shortfall: number, uncompared: number): string {
  const replayed = done.replayed ? `, replayed ${plural(done.replayed, 'failed capture')}` : '';
  const left = shortfall === 0 && uncompared === 0 ? 'shortfall now 0, nothing left to compare'
    : `still missing ${formatCount(shortfall)}${uncompared > 0 ? `, not compared yet ${formatCount(uncompared)}` : ''}`;
  return `compared ${plural(done.compared, 'subagent message')}, stored ${plural(done.repaired, 'missing row')}${replayed}; ${left}`;
}

/** Why keys are still missing after a repair, as far as health knows. */
function stillMissing(done: Done, shortfall: number): string {
  const reasons = [
    done.held > 0 ? `${formatCount(done.held)} held by a transaction still open (run \`subagent-context repair\` again once it ends)` : '',
    done.unreplayed > 0 ? `${plural(done.unreplayed, 'failed capture')} whose write failed again (subagent_context_failures says why)` : '',
  ].filter(Boolean);
  return `${formatCount(shortfall)} still missing: ${reasons.length ? `${reasons.join('; ')}; the rest ` : ''}` +
    'could not be stored: a row for the same session and tool call exists, observed before capture_since (a reused tool_call_id), ' +
    'or their message was written after this repair compared. See docs/health.md#on-a-shortfall.';
}

interface Done { repaired: number; replayed: number; held: number; unreplayed: number; compared: number }

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
