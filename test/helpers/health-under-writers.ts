// One workload for "health under concurrent writers", on plain tables and on Citus alike
// (test/health/health-under-writers.test.ts, test/citus/health-under-writers.test.ts): writers that each INSERT a
// subagent frame and then UPDATE it to its completed frame, over and over, across sessions, while another
// session reads subagent_context_health() again and again. Capture writes a message and its row in one
// transaction, so nothing is ever missing: every check must see shortfall 0 and excess 0.
import type pg from 'pg';
import { quoteIdent } from '#sql';
import { subagentMetadata } from '../../kandev/host.js';
import { reconcileAll } from '../../src/reconcile.js';
import { utcTimestamp } from '../../src/timestamp.js';

export interface Check { shortfall: bigint | null; excess: bigint | null; status: string }

export interface UnderWriters {
  /** Every health check, in order. */
  checks: Check[];
  /** Calls written (each one INSERT and one UPDATE). */
  calls: number;
  /** Health once the writers stopped. */
  after: Check;
}

/**
 * `writers` connections write until `checks` health checks have run on `checker`. `sessions` exist, each
 * with a turn `turn-<session>` of task `task-<session>` (kandev/host.ts createTurn).
 */
export async function healthUnderWriters(opts: {
  schema: string; sessions: string[]; writers: pg.Client[]; checker: pg.Client; checks: number;
}): Promise<UnderWriters> {
  const s = quoteIdent(opts.schema);
  let done = false;
  let calls = 0;
  const write = async (w: pg.Client, i: number) => {
    for (let k = 0; !done; k++) {
      const session = opts.sessions[(i + k) % opts.sessions.length]!;
      const key = session.replace(/^session-/, '');
      const call = `call-w${i}-${k}`;
      const id = `m-w${i}-${k}`;
      await w.query(`INSERT INTO ${s}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, 'agent', '', 'tool_call', $5, clock_timestamp() AT TIME ZONE 'UTC', clock_timestamp() AT TIME ZONE 'UTC')`,
        [id, session, `task-${key}`, `turn-${key}`, subagentMetadata({ tool_call_id: call, status: 'pending', subagent: { subagent_type: 'explorer', status: 'async_launched' } })]);
      // The time is sent, not computed in the UPDATE: Citus refuses volatile functions there (docs/citus.md).
      await w.query(`UPDATE ${s}.task_session_messages SET metadata = $3, updated_at = $4::timestamp WHERE task_session_id = $1 AND id = $2`,
        [session, id, subagentMetadata({ tool_call_id: call, status: 'completed', subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 100 + k } }),
         utcTimestamp(Date.now())]);
      calls++;
    }
  };
  const health = async (): Promise<Check> => {
    const { rows: [h] } = await opts.checker.query(`SELECT shortfall, excess, status FROM ${s}.subagent_context_health()`);
    return h as Check;
  };
  let failed: unknown = null;
  const writing = Promise.all(opts.writers.map((w, i) => write(w, i)));
  writing.catch((err) => { failed = err; done = true; });
  const checks: Check[] = [];
  try {
    // The writers are under way before the first check.
    while (calls < opts.writers.length && !failed) await new Promise((r) => setTimeout(r, 10));
    if (failed) throw failed;
    for (let n = 0; n < opts.checks; n++) checks.push(await health());
  } finally {
    done = true;
    await writing;
  }
  // Afterwards, once a complete comparison has compared what the writers wrote (more than one health call
  // compares itself on a fast machine, which health reports as `behind`, not `healthy`; `health --full`'s
  // own): everything is there.
  await reconcileAll(opts.checker, opts.schema, { now: true });
  return { checks, calls, after: await health() };
}

/** The checks that saw something, in one line: "0 of 40 checks with a shortfall or an excess" when none did. */
export function nonZero(checks: Check[]): string {
  const bad = checks.filter((c) => c.shortfall !== 0n || c.excess !== 0n);
  return `${bad.length} of ${checks.length} checks with a shortfall or an excess` +
    (bad.length ? `: ${bad.map((c) => `shortfall ${c.shortfall} excess ${c.excess}`).join(', ')}` : '');
}
