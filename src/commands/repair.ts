import type pg from 'pg';
import type { Command } from './types.js';
import { assertWritable, inStep, stepInOneTrip, withClient } from '../db.js';
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

--json prints {"repaired": N, "replayed": R, "classified": C, "compared": K, "held": H, "unreplayed": U,
"shortfall": M, "uncompared": X, "status": S, "stays": {...}, "seconds": {...}}: rows stored, failures
replayed, failures classified by this run as never replayable, subagent messages compared first, rows a
transaction still held, failures whose write failed again, the shortfall afterwards, messages not compared yet, health's
status (a disabled trigger is still trigger_disabled: repair stores rows, it does not turn capture back
on), and what stays and why: "held" (a transaction still holds the row: run again later),
"stale_failures" (failures still to replay), "key_too_long" and "value_not_storable" (failures no run can
replay), "missing_key_too_long" and "missing_reused_tool_call_id" (missing keys no run can store); and
the wall time of each part. See docs/reliability.md#failure-log.

Example:
  subagent-context health; [ $? -eq 1 ] && subagent-context repair   # only on a shortfall (exit 1)`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await sameRelease(client, ctx.schema);
      await assertWritable(client);
      const done: Done = { repaired: 0, replayed: 0, classified: 0, held: 0, unreplayed: 0, compared: 0,
        seconds: { compare: 0, replay: 0, store: 0 } };
      const stream = ctx.json ? undefined : process.stderr;
      await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: async () => `repair stopped: ${formatCount(done.repaired)} missing row${done.repaired === 1 ? '' : 's'} stored and ` +
          `${formatCount(done.replayed)} failed capture${done.replayed === 1 ? '' : 's'} replayed in the batches that had committed ` +
          '(the one running was rolled back); run `subagent-context repair` again to do the rest.',
      }, async () => {
        // First a complete comparison of everything written up to now (health --full's), so that what
        // repair stores is everything `health --full` would find, back-dated messages included.
        const t0 = performance.now();
        const last = await reconcileAll(client, ctx.schema, { stream, now: true });
        done.compared = last.messages_compared ?? 0;
        done.seconds.compare = (performance.now() - t0) / 1000;
        await repair(client, ctx.schema, done, stream);
      });
      const health = await readHealth(client, ctx.schema);
      const shortfall = health.shortfall ?? 0;
      const uncompared = health.uncompared ?? 0;
      const stays = { held: done.held, ...await leftovers(client, ctx.schema) };
      if (ctx.json) {
        printJson({ repaired: done.repaired, replayed: done.replayed, classified: done.classified, compared: done.compared,
          held: done.held, unreplayed: done.unreplayed, shortfall, uncompared, status: health.status, stays,
          seconds: Object.fromEntries(Object.entries(done.seconds).map(([k, v]) => [k, Math.round(v * 1000) / 1000])) });
      } else {
        console.log(summary(done, shortfall, uncompared));
        for (const line of staysSentences(stays, shortfall)) console.log(yellow(line));
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

interface Done {
  repaired: number; replayed: number; classified: number; held: number; unreplayed: number; compared: number;
  /** Wall time of each part: the complete comparison, the replay of failures, the store of missing rows. */
  seconds: { compare: number; replay: number; store: number };
}

/** What stays after a repair, and why (subagent_context_repair_leftovers(), plus the keys held during this run). */
interface Stays {
  held: number; stale_failures: number; key_too_long: number; value_not_storable: number;
  missing_key_too_long: number; missing_reused_tool_call_id: number;
}

async function leftovers(client: pg.Client, schema: string): Promise<Omit<Stays, 'held'>> {
  const { rows: [l] } = await client.query(
    `SELECT stale_failures::float8 AS stale_failures, key_too_long::float8 AS key_too_long,
            value_not_storable::float8 AS value_not_storable, missing_key_too_long::float8 AS missing_key_too_long,
            missing_reused_tool_call_id::float8 AS missing_reused_tool_call_id
       FROM ${quoteIdent(schema)}.subagent_context_repair_leftovers()`);
  return l;
}

/** One sentence per reason something stays, in words an operator acts on. */
export function staysSentences(stays: Stays, shortfall: number): string[] {
  const n = formatCount;
  const lines: string[] = [];
  if (stays.held > 0) {
    lines.push(`${n(stays.held)} missing row${stays.held === 1 ? '' : 's'} not stored now: a transaction that is still open holds ` +
      `${stays.held === 1 ? 'it' : 'them'}; run \`subagent-context repair\` again later.`);
  }
  if (stays.stale_failures > 0) {
    lines.push(`${n(stays.stale_failures)} failed capture${stays.stale_failures === 1 ? '' : 's'} not replayed yet (the row was held, ` +
      'or the message changed while it was merged): those rows may be stale; run `subagent-context repair` again later.');
  }
  const poison = stays.key_too_long + stays.value_not_storable;
  if (poison > 0) {
    const why = [stays.key_too_long ? `${n(stays.key_too_long)} whose key (session, execution and tool call ids) is too long for the unique index` : '',
      stays.value_not_storable ? `${n(stays.value_not_storable)} whose values cannot be stored (subagent_context_failures.sqlstate says which)` : '']
      .filter(Boolean).join(', ');
    lines.push(`${n(poison)} failed capture${poison === 1 ? '' : 's'} can never be replayed: ${why}; ` +
      'they are kept in subagent_context_failures with stays_because and not retried. See docs/reliability.md#failure-log.');
  }
  const explained = stays.missing_key_too_long + stays.missing_reused_tool_call_id;
  if (stays.missing_key_too_long > 0) {
    lines.push(`${n(stays.missing_key_too_long)} still missing because ${stays.missing_key_too_long === 1 ? 'its key is' : 'their keys are'} ` +
      'too long for the unique index: no row can be stored for them. See docs/reliability.md#failure-log.');
  }
  if (stays.missing_reused_tool_call_id > 0) {
    lines.push(`${n(stays.missing_reused_tool_call_id)} still missing because a row for the same session and tool call exists, ` +
      'observed before capture_since (a reused tool_call_id): repair never touches an existing row. See docs/health.md.');
  }
  const other = shortfall - explained - stays.held;
  if (other > 0) {
    lines.push(`${n(other)} still missing: written after this repair, or no longer a subagent call; see \`subagent-context health\` and docs/health.md.`);
  }
  return lines;
}

const plural = (n: number, one: string, many = `${one}s`) => `${formatCount(n)} ${n === 1 ? one : many}`;

/** What repair did and what is left, in one line: never "shortfall now 0" while something is left. */
function summary(done: Done, shortfall: number, uncompared: number): string {
  const replayed = done.replayed ? `, replayed ${plural(done.replayed, 'failed capture')}` : '';
  const left = shortfall === 0 && uncompared === 0 ? 'shortfall now 0, nothing left to compare'
    : `still missing ${formatCount(shortfall)}${uncompared > 0 ? `, not compared yet ${formatCount(uncompared)}` : ''}`;
  return `compared ${plural(done.compared, 'subagent message')}, stored ${plural(done.repaired, 'missing row')}${replayed}; ${left}`;
}


// A batch's or a replay's commit does not wait for the WAL flush, which it would do holding the rows it
// stored: a crash loses only the last batches, whose keys (or failures) stay recorded for the next run.
const ASYNC_COMMIT = { synchronous_commit: 'off' };

/** Failed captures replayed, then missing keys stored, batch after batch (each its own transaction), counting into `done`. */
async function repair(client: pg.Client, schema: string, done: Done, stream?: NodeJS.WriteStream): Promise<void> {
  const s = quoteIdent(schema);
  // Each failure is replayed in a transaction of its own, committed right after its merge: the row it
  // merged is held for no longer than that (docs/reliability.md#replay).
  let t0 = performance.now();
  let cursor: unknown[] = [null, null];
  for (;;) {
    const { rows: page } = await client.query(
      `SELECT id::text, task_session_id, occurred_at::text FROM ${s}.subagent_context_failures_to_replay($1::timestamp, $2::bigint, 500)`, cursor);
    for (const f of page) {
      const [r] = await stepInOneTrip<{ outcome: string }>(client,
        `SELECT outcome FROM ${s}.subagent_context_replay_failure($1::bigint, $2::text)`, [f.id, f.task_session_id], ASYNC_COMMIT);
      if (r.outcome === 'replayed') done.replayed += 1;
      else if (r.outcome === 'classified') done.classified += 1;
      else done.unreplayed += 1;
    }
    if (page.length < 500) break;
    cursor = [page.at(-1).occurred_at, page.at(-1).id];
  }
  done.seconds.replay = (performance.now() - t0) / 1000;
  // What was written while it replayed, compared: the comparison's last step, timed with it. The first
  // batch then does not compare again (on Citus a statement on every shard).
  t0 = performance.now();
  await inStep(client, () => client.query(`SELECT ${s}.subagent_context_repair_compare()`));
  done.seconds.compare += (performance.now() - t0) / 1000;
  t0 = performance.now();
  const shown = stream?.isTTY ? step('repair: storing the missing rows', { stream, quiet: true }) : undefined;
  cursor = [null, null, 'true'];
  let total = 0;
  try {
    for (;;) {
      const [b] = await stepInOneTrip(client,
        `SELECT repaired::float8 AS repaired, held::float8 AS held, pending::float8 AS pending, next_created_at::text, next_key, more, put_back
           FROM ${s}.subagent_context_repair($1::timestamp, $2::text, false, $3::boolean)`, cursor, ASYNC_COMMIT);
      done.repaired += b.repaired;
      done.held += b.held;
      if (b.pending !== null) total = done.repaired + done.held + b.pending;  // counted by the first batch only
      shown?.update(done.repaired + done.held, total);
      if (!b.more) break;
      cursor = [b.next_created_at, b.next_key, String(b.put_back)];  // the next batch checks first what this one put back
    }
    shown?.clear();
    done.seconds.store = (performance.now() - t0) / 1000;
  } catch (err) {
    shown?.fail();
    throw err;
  }
}
