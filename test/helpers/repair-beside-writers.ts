// One workload for "repair never makes a capture fail", on plain tables and on Citus alike
// (test/repair/repair-beside-writers.test.ts, test/citus/repair-beside-writers.test.ts): a store with a large gap
// (calls made since activation whose rows were deleted) and a few thousand failed captures (rows left one
// frame behind their messages, each with its failure recorded), then `repair` while kandev's writers
// update the frames of exactly those calls, each under kandev's own statement_timeout. Every statement is
// routed by its session, so the same code runs through a Citus coordinator.
import type pg from 'pg';
import { quoteIdent } from '#sql';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';

/** A frame's usage, as a writer sets it: large enough to be told from any value the traffic model writes. */
const OURS = 1_000_000;

export interface Workload { gap: number; failed: number; sessions: number; prefix: string }

/**
 * Writes `gap + failed` calls since activation into an activated `schema`: the first `gap` lose their rows,
 * the others get one more frame (usage) that their rows then lose again, each with a failure recorded as a
 * capture would record it. Returns when that is done.
 */
export async function prepareRepair(c: pg.ClientBase, schema: string, w: Workload): Promise<void> {
  const s = quoteIdent(schema);
  // Created from now on: a reconciliation that started since activation has compared the instants before it,
  // where health finds a back-dated miss only at the next one (docs/health.md).
  const base = (await c.query(`SELECT greatest($1::timestamp, clock_timestamp() AT TIME ZONE 'UTC')::text AS at`,
    [await afterActivation(c, schema)])).rows[0].at as string;
  await writeSubagentCalls(c, schema, { calls: w.gap + w.failed, sessions: w.sessions, prefix: w.prefix, base, step: '1 millisecond' });
  const call = `substring(tool_call_id FROM ${w.prefix.length + 7})::int`;  // <prefix>-call-<i>
  await c.query(`DELETE FROM ${s}.task_session_subagents WHERE tool_call_id LIKE $1 AND ${call} < $2`, [`${w.prefix}-call-%`, w.gap]);
  // One more frame of each failed call, captured, then taken back from its row: the row as a failed capture left it.
  await c.query(
    `UPDATE ${s}.task_session_messages SET metadata = ${withUsage('metadata', '$3::bigint')}
      WHERE id LIKE $1 AND substring(id FROM ${w.prefix.length + 3})::int >= $2`, [`${w.prefix}-m%`, w.gap, OURS]);
  await c.query(`UPDATE ${s}.task_session_subagents SET total_tokens = NULL WHERE tool_call_id LIKE $1 AND ${call} >= $2`,
    [`${w.prefix}-call-%`, w.gap]);
  await c.query(
    `INSERT INTO ${s}.subagent_context_failures (task_session_id, tool_call_id, message_id, agent_execution_id, sqlstate, message)
     SELECT m.task_session_id, m.metadata::jsonb ->> 'tool_call_id', m.id, 'unknown', '55P03', 'the test: a frame whose capture failed'
       FROM ${s}.task_session_messages AS m
      WHERE m.id LIKE $1 AND substring(m.id FROM ${w.prefix.length + 3})::int >= $2`, [`${w.prefix}-m%`, w.gap]);
}

/** The metadata text `doc` with the frame's usage set to `tokens` (and its status running). */
function withUsage(doc: string, tokens: string) {
  return `jsonb_set(${doc}::jsonb, '{normalized,subagent_task}',
            coalesce(${doc}::jsonb #> '{normalized,subagent_task}', '{}') || jsonb_build_object('status', 'running', 'total_tokens', ${tokens}))::text`;
}

export interface Writers {
  /** Stops the writers and says what they did: frames written, every error a write met, and the longest write (ms). */
  stop(): Promise<{ frames: number; errors: string[]; longestMs: number }>;
}

/** `clients` write new frames of the workload's calls, one committed UPDATE each, until stopped. */
export function startWriters(clients: pg.Client[], schema: string, w: Workload): Writers {
  const s = quoteIdent(schema);
  let done = false;
  let frames = 0;
  let longestMs = 0;
  const errors: string[] = [];
  const calls = w.gap + w.failed;
  const write = async (c: pg.Client, n: number) => {
    await c.query(`SET statement_timeout = '4s'`);  // kandev's own
    for (let k = 0; !done; k++) {
      // Spread over the whole workload, gap and failed calls alike, from each writer's own starting point.
      const i = (n * 7919 + k * 104_729) % calls;
      const t0 = performance.now();
      try {
        await c.query(
          `UPDATE ${s}.task_session_messages SET metadata = ${withUsage('metadata', '$3::bigint')}, updated_at = $4::timestamp
            WHERE task_session_id = $1 AND id = $2`,
          [`${w.prefix}-ses-${i % w.sessions}`, `${w.prefix}-m${i}`, OURS + 1 + n * 1_000_000 + k, new Date().toISOString().replace('Z', '')]);
        frames += 1;
        longestMs = Math.max(longestMs, performance.now() - t0);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
  };
  const running = clients.map((c, n) => write(c, n));
  return { stop: async () => { done = true; await Promise.all(running); return { frames, errors, longestMs: Math.round(longestMs) }; } };
}

/**
 * What the workload's calls look like now: messages without a row (missing), rows whose usage is not their
 * message's (stale: every call written by a writer or failed carries usage of ours), and capture failures
 * recorded or counted again since `since` (any frame whose capture failed: none may).
 */
export async function afterRepair(c: pg.ClientBase, schema: string, w: Workload, since: string) {
  const s = quoteIdent(schema);
  const { rows: [r] } = await c.query(
    `SELECT count(*) FILTER (WHERE r.tool_call_id IS NULL)::int AS missing,
            count(*) FILTER (WHERE (m.metadata::jsonb #>> '{normalized,subagent_task,total_tokens}')::bigint >= $2
                               AND r.total_tokens IS DISTINCT FROM (m.metadata::jsonb #>> '{normalized,subagent_task,total_tokens}')::bigint)::int AS stale
       FROM ${s}.task_session_messages AS m
       LEFT JOIN ${s}.task_session_subagents AS r
         ON r.task_session_id = m.task_session_id AND r.tool_call_id = m.metadata::jsonb ->> 'tool_call_id'
      WHERE m.id LIKE $1`, [`${w.prefix}-m%`, OURS]);
  const { rows: failed } = await c.query(
    `SELECT sqlstate, message, occurrences FROM ${s}.subagent_context_failures
      WHERE occurred_at >= $1::timestamp OR last_occurred_at >= $1::timestamp ORDER BY id`, [since]);
  const { rows: [open] } = await c.query(
    `SELECT count(*)::int AS n FROM ${s}.subagent_context_failures WHERE replayed_at IS NULL`);
  return { missing: r.missing as number, stale: r.stale as number, failedDuringRepair: failed, unreplayed: open.n as number };
}
