// What the Citus tests of bounded waits need (test/citus/worker-holder.test.ts, test/citus/interrupt.test.ts):
// a session open on a worker that holds a shard of task_session_messages, kandev writing through the
// coordinator beside it, and a look at every node for a statement of ours left behind.
import type pg from 'pg';
import { createTurn, insertMessage } from '../../kandev/host.js';
import { workerOf, type CitusTestDatabase } from './citus.js';

export interface WorkerHolder {
  /** The holder's pid on its worker, and that worker as `host:port`. */
  pid: number;
  node: string;
  end(): Promise<void>;
}

/**
 * A session on the worker that holds `session`'s shard, in a transaction left open after one statement on
 * that shard, run there (Citus executes it locally, so this session holds the shard's lock itself): a
 * reader (SELECT: AccessShareLock, which only ACCESS EXCLUSIVE waits for) or a writer (UPDATE: RowExclusiveLock).
 */
export async function holdOnWorker(db: CitusTestDatabase, session: string, kind: 'reader' | 'writer'): Promise<WorkerHolder> {
  const node = await workerOf(db, 'public', session);
  const worker = db.workers.find((w) => `${w.host}:${w.port}` === node)!;
  const c = await db.connectTo(worker);
  const { rows: [{ pid }] } = await c.query('SELECT pg_catalog.pg_backend_pid() AS pid');
  await c.query('BEGIN');
  await c.query(kind === 'reader'
    ? 'SELECT count(*) FROM public.task_session_messages WHERE task_session_id = $1'
    : 'UPDATE public.task_session_messages SET updated_at = updated_at WHERE task_session_id = $1', [session]);
  return {
    pid, node,
    end: async () => { await c.query('ROLLBACK').catch(() => {}); },
  };
}

/**
 * kandev writing through the coordinator until stopped: one message at a time into `session` (statement_timeout
 * 20 s, as kandev's clients might have), each write's time kept; stop() returns the longest and the count.
 */
export async function probeWriter(db: CitusTestDatabase, key: string) {
  const c: pg.Client = await db.connect();
  await c.query(`SET statement_timeout = '20s'`);
  const t = await createTurn(c, 'public', key);
  let stop = false;
  let worst = 0;
  let writes = 0;
  let failed = 0;
  const loop = (async () => {
    for (let n = 0; !stop; n++) {
      const t0 = performance.now();
      try {
        await insertMessage(c, 'public', { id: `${key}-${n}`, session: t.session, task: t.task, turn: t.turn, metadata: '{"kind":"message"}' });
        writes++;
      } catch {
        failed++;
      }
      worst = Math.max(worst, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    session: t.session,
    stop: async () => { stop = true; await loop; return { worstMs: Math.round(worst), writes, failed }; },
  };
}

/**
 * What of ours is still on the server, on every node of the cluster: sessions of the CLI on the coordinator
 * (its application_name), statements its transaction sent to the workers (Citus names those connections
 * after the global pid `gpid` of the CLI's backend on the coordinator), and anything waiting for a lock.
 * Empty when all is stopped.
 */
export async function leftOnNodes(db: CitusTestDatabase, gpid?: string): Promise<string[]> {
  const left: string[] = [];
  const nodes = [null, ...db.workers];
  for (const node of nodes) {
    const c = node ? await db.connectTo(node) : await db.connect();
    try {
      const { rows } = await c.query(
        `SELECT pid, state, wait_event_type, application_name, left(query, 60) AS query FROM pg_catalog.pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_catalog.pg_backend_pid()
            AND (application_name LIKE 'subagent-context%' OR wait_event_type = 'Lock'
                 OR (state <> 'idle' AND application_name = 'citus_internal gpid=' || $1::text))`, [gpid ?? null]);
      for (const r of rows) left.push(`${node ? `${node.host}:${node.port}` : 'coordinator'}: ${JSON.stringify(r)}`);
    } finally {
      await c.end();
    }
  }
  return left;
}

/** Polls `condition` every 100 ms for up to `ms`; returns its last value. */
export async function waitFor<T>(condition: () => Promise<T>, done: (v: T) => boolean, ms: number): Promise<T> {
  const until = Date.now() + ms;
  let v = await condition();
  while (!done(v) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 100));
    v = await condition();
  }
  return v;
}

/** What a command left of capture: the activation keys there are, and whether the trigger exists. */
export async function captureState(db: CitusTestDatabase): Promise<{ keys: number; trigger: boolean }> {
  return (await db.query<{ keys: number; trigger: boolean }>(
    `SELECT (SELECT count(*)::int FROM public.kandev_meta WHERE key LIKE 'subagent_context_%') AS keys,
            EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgname = 'subagent_context_capture') AS trigger`)).rows[0];
}
