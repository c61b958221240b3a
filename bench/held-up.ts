// kandev's writes while `up` waits behind a transaction that holds kandev's table (docs/reliability.md#locks,
// docs/citus.md#locks-on-the-workers): for bench/cases/13-citus.ts. On Citus the holder is a session on a
// worker, idle in its transaction after writing to a shard (it reached the worker directly, not through the
// coordinator); on plain tables, the same session on the one server. `up` applies its code layer again (the
// installation's recorded digest is made to differ, as after a release), so it must take its locks and waits
// behind the holder until it gives up (exit 3); meanwhile kandev writes through the coordinator, each write
// timed. Then the holder commits and `up` runs again, to leave the store installed as it was.
import pg from 'pg';
import { createTurn, insertMessage } from '../kandev/host.js';
import { now, summary } from './harness.js';
import { runCli } from './reconcile.js';

const WRITERS = 4;

export interface HeldUp {
  /** How long `up` took to end by itself, and its exit code (3: it gave up, naming the holder). */
  up_s: number;
  up_exit: number;
  /** kandev's writes meanwhile: the longest, the median, how many, how many failed (statement_timeout 20 s). */
  write_max_ms: number;
  write_median_ms: number;
  writes: number;
  writes_failed: number;
}

/**
 * `url`: the database kandev writes to (the coordinator on Citus); `holderUrl(session)`: where a session's
 * message rows are (the worker holding its shard, on Citus; `url` on plain tables).
 */
export async function upBehindHolder(url: string, holderUrl: (session: string) => Promise<string>, key: string): Promise<HeldUp> {
  const open = async (u: string) => {
    const c = new pg.Client(u);
    c.on('error', () => {});
    c.on('notice', () => {});
    await c.connect();
    return c;
  };
  const main = await open(url);
  const writers: pg.Client[] = [];
  let holder: pg.Client | undefined;
  try {
    const turns: Awaited<ReturnType<typeof createTurn>>[] = [];
    for (let w = 0; w < WRITERS; w++) turns.push(await createTurn(main, 'public', `${key}-${w}`));
    await main.query(`UPDATE public.subagent_context_installed SET code_digest = 'an earlier build'`);
    holder = await open(await holderUrl(turns[0].session));
    await holder.query('BEGIN');
    await holder.query('UPDATE public.task_session_messages SET updated_at = updated_at WHERE task_session_id = $1', [turns[0].session]);
    for (let w = 0; w < WRITERS; w++) {
      const c = await open(url);
      await c.query(`SET statement_timeout = '20s'`);
      writers.push(c);
    }
    let stop = false;
    let failed = 0;
    const times: number[] = [];
    const loops = writers.map(async (c, w) => {
      for (let n = 0; !stop; n++) {
        const t0 = now();
        try {
          await insertMessage(c, 'public', { id: `${key}-${w}-${n}`, session: turns[w].session, task: turns[w].task,
            turn: turns[w].turn, metadata: '{"kind":"message"}' });
        } catch {
          failed++;
        }
        times.push(now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
    });
    const r = await runCli(url, ['up']);
    stop = true;
    await Promise.all(loops);
    await holder.query('COMMIT');
    const again = await runCli(url, ['up']);
    if (again.code !== 0) throw new Error(`bench: up after the holder ended exited ${again.code}: ${again.stderr.trim()}`);
    return {
      up_s: r.ms / 1000, up_exit: r.code,
      write_max_ms: Math.max(...times), write_median_ms: summary(times).median, writes: times.length, writes_failed: failed,
    };
  } finally {
    await holder?.query('ROLLBACK').catch(() => {});
    for (const c of [main, ...writers, ...(holder ? [holder] : [])]) await c.end().catch(() => {});
  }
}
