// Many subagent calls, written fast: for the tests and the benchmark that need tens of thousands of them
// (a backfill, a repair) and would wait minutes for kandev's own statements (kandev/traffic-write.ts
// issues one INSERT and a few UPDATEs per message, one round trip each: on Citus every one crosses the
// coordinator).
//
// Each call is one message in its final state (kandev updates a tool call's message in place, so history
// holds the last frame), its metadata the final frame of one of the traffic model's subagent calls
// (kandev/traffic-plan.ts: every status, async launches, usage, models, result texts of up to 50 KB),
// its tool_call_id made unique. Written set-based, a few multi-row INSERT … SELECT statements, the same
// rows on any server: a plain one, a partitioned table, a Citus coordinator.
import { quoteIdent } from '#sql';
import type { Queryable } from './host.js';
import { planTraffic } from './traffic-plan.js';

export interface SubagentCalls {
  /** How many calls (messages), and over how many sessions (one task and one turn each). */
  calls: number;
  sessions: number;
  /** Makes every id of this batch its own (a second batch in the same store needs another). */
  prefix: string;
  /** created_at of the first message (UTC); message i is created `step` × i after it. */
  base: string;
  /** Between two messages' created_at; default 1 second. */
  step?: string;
  /**
   * Another batch's prefix: its sessions (with their tasks and turns) take this batch's calls, and none
   * are created. Default: this batch's own, created here.
   */
  sessionsOf?: string;
}

interface Frame { call: string; metadata: string }

let frames: Frame[] | undefined;

/** The final frame of every subagent call of the traffic model at scale 1 (253 of them), in plan order. */
export function subagentFrames(): Frame[] {
  if (frames) return frames;
  const last = new Map<string, string>();
  for (const s of planTraffic({ invalidJson: false }).sessions) {
    for (const t of s.turns) {
      for (const w of t.writes) {
        if (w.op === 'delete_message') last.delete(w.message);
        else if ((w.op === 'insert' || w.op === 'update') && w.qualifies && !w.noIdentity && w.metadata) last.set(w.message, w.metadata);
      }
    }
  }
  frames = [...last.values()].map((metadata) => ({ call: JSON.parse(metadata).tool_call_id as string, metadata }));
  return frames;
}

/**
 * Writes the calls (and, unless they exist, their tasks, sessions and turns) into `schema`. Call `i` is
 * message `<prefix>-m<i>` with tool call `<prefix>-call-<i>`, in session `<sessions' prefix>-ses-<i % sessions>`
 * (task `…-task-…`, turn `…-turn-…`), the frames taken in turn.
 */
export async function writeSubagentCalls(c: Queryable, schema: string, opts: SubagentCalls): Promise<void> {
  const s = quoteIdent(schema);
  const { calls, sessions, prefix, base } = opts;
  const step = opts.step ?? '1 second';
  const owner = opts.sessionsOf ?? prefix;
  if (opts.sessionsOf === undefined) {
    const each = (table: string, columns: string, values: string) =>
      c.query(`INSERT INTO ${s}.${table} (${columns}) SELECT ${values} FROM generate_series(0, $2::int - 1) AS g`, [owner, sessions, base]);
    await each('tasks', 'id, title, created_at, updated_at', `$1 || '-task-' || g, 'card', $3::timestamp, $3::timestamp`);
    await each('task_sessions', 'id, task_id, started_at, updated_at', `$1 || '-ses-' || g, $1 || '-task-' || g, $3::timestamp, $3::timestamp`);
    await each('task_session_turns', 'id, task_session_id, task_id, started_at, created_at, updated_at',
      `$1 || '-turn-' || g, $1 || '-ses-' || g, $1 || '-task-' || g, $3::timestamp, $3::timestamp, $3::timestamp`);
  }
  const f = subagentFrames();
  // Slices of a few thousand messages: no one statement carries the whole batch's metadata.
  const slice = 5000;
  for (let from = 0; from < calls; from += slice) {
    await c.query(
      `WITH frame AS (SELECT * FROM unnest($1::int[], $2::text[], $3::text[]) AS f(k, call, metadata))
       INSERT INTO ${s}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
       SELECT $4 || '-m' || i, $11 || '-ses-' || i % $5, $11 || '-task-' || i % $5, $11 || '-turn-' || i % $5, 'agent', '', 'tool_call',
              replace(f.metadata, to_json(f.call)::text, to_json($4 || '-call-' || i)::text),
              $6::timestamp + i * $7::interval, $6::timestamp + i * $7::interval
         FROM generate_series($8::int, $9::int) AS i
         JOIN frame AS f ON f.k = i % $10`,
      [f.map((_, k) => k), f.map((x) => x.call), f.map((x) => x.metadata), prefix, sessions, base, step,
       from, Math.min(calls, from + slice) - 1, f.length, owner]);
  }
}

/**
 * A `base` for calls written since activation: 1 ms after `capture_since` (read from health), so that
 * every one of them is compared by health, wherever the clock of the store's server stands.
 */
export async function afterActivation(c: Queryable, schema: string): Promise<string> {
  const { rows: [r] } = await c.query(
    `SELECT (replace(rtrim(capture_since, 'Z'), 'T', ' ')::timestamp + interval '1 millisecond')::text AS at
       FROM ${quoteIdent(schema)}.subagent_context_health()`);
  if (!r?.at) throw new Error(`${schema}: not activated`);
  return r.at as string;
}
