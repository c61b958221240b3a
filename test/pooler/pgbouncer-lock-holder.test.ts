// A kandev session idle in a transaction, holding a message it wrote, while `up` runs, everything through
// pgbouncer in transaction pooling (docs/reliability.md#locks): `up` stops in the documented sentence
// naming that session alone, not the writers that queued behind its lock request and got the table the
// moment it gave its place back; no writer fails. Before it, `metrics --once` ran through the same
// pooler: nothing it set (its statement_timeout) may cut `up`'s retries short on the connection `up` gets next.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { PGBOUNCER, startPgbouncer, type Pgbouncer } from '../helpers/pgbouncer.js';
import { createTurn, subagentMetadata } from '../../kandev/host.js';

if (!PGBOUNCER) console.warn('pgbouncer-lock-holder.test.ts skipped: pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)');

const db = await freshDatabase('pgbouncer_lock_holder', { from: 'host' });
const cli = builtCli();
let bouncer: Pgbouncer;

const cliThrough = (args: string[]) => runCli(cli, [...args, '--database-url', bouncer.url]);

const INSERT = `INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                VALUES ($1, 'session-w', 'task-w', 'turn-w', 'agent', '', 'tool_call', $2, now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC')`;

/**
 * One frame as one statement, in its own transaction: the execution id set for that transaction, the
 * frame inserted, the server's pid returned. A writer's transaction never spans a round trip to this
 * process, so a writer holds the table only while the server runs its statement. (On 4259581 each
 * frame was BEGIN, set_config, INSERT, COMMIT: on a loaded machine this process could stall for more
 * than the lock wait between the INSERT and the COMMIT, and that writer then truly held the table
 * through `up`'s last try, and was rightly named beside the holder: [9971, 10089].)
 */
const FRAME = `WITH tagged AS (SELECT set_config('subagent_context.agent_execution_id', $3, true) AS execution)
  INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
  SELECT $1, 'session-w', 'task-w', 'turn-w', 'agent', '', 'tool_call', $2, now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
    FROM tagged RETURNING pg_backend_pid() AS pid`;

/** kandev's writers through the pooler: a frame per transaction, tagged with the writer's execution id. */
function startWriters(n: number) {
  const failures: string[] = [];
  const written: { id: string; execution: string }[] = [];
  const pids = new Set<number>();
  let stop = false;
  const writer = async (w: number) => {
    const c = new pg.Client(bouncer.url);
    c.on('error', () => {});
    await c.connect();
    try {
      for (let i = 0; !stop; i++) {
        const id = `w${w}-${i}`;
        try {
          const { rows: [r] } = await c.query(FRAME, [id, subagentMetadata({ tool_call_id: `toolu_${id}`, status: 'pending' }), `exec-${w}`]);
          pids.add(r.pid);
          written.push({ id, execution: `exec-${w}` });
        } catch (err) {
          failures.push(`${id}: ${(err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await c.end().catch(() => {});
    }
  };
  const running = Promise.all(Array.from({ length: n }, (_, w) => writer(w + 1)));
  return { pids, async stop() { stop = true; await running; return { failures, written }; } };
}

describe.skipIf(!PGBOUNCER)('up, with a kandev session idle in a transaction, through pgbouncer', () => {
  beforeAll(async () => {
    await createTurn(db.pool, 'public', 'w');
    // An installation elsewhere in the database, for the exporter to evaluate and reconcile.
    await db.createHost('elsewhere');
    await db.up('elsewhere');
    bouncer = await startPgbouncer(db.url, { poolSize: 3 });
  }, 60_000);

  afterAll(async () => { await bouncer?.stop(); });

  it('stops naming the idle session alone; no writer fails; once it ends, up installs', async () => {
    const holder = new pg.Client(bouncer.url);
    holder.on('error', () => {});
    await holder.connect();
    await holder.query('BEGIN');
    const { rows: [{ pid: holderPid }] } = await holder.query('SELECT pg_backend_pid() AS pid');
    await holder.query(INSERT, ['held', subagentMetadata({ tool_call_id: 'toolu_held', status: 'pending' })]);

    // What an exporter or a cron job leaves on the pooled connection it used, if anything: the one `up` gets next.
    const metrics = await cliThrough(['metrics', '--once', '--schema', 'elsewhere']);
    expect(metrics.stdout).toMatch(/^subagent_context_up\{[^}]*\} 1$/m);

    const writers = startWriters(2);
    let r: Awaited<ReturnType<typeof cliThrough>>;
    let writes: Awaited<ReturnType<typeof writers.stop>>;
    try {
      r = await cliThrough(['up']);
    } finally {
      writes = await writers.stop();
    }
    const { failures, written } = writes;
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    const sentence = r.stderr.trim();
    expect(sentence.split('\n')).toHaveLength(1);
    expect(sentence).toMatch(new RegExp(`^error: "public"\\.task_session_messages is held by a long transaction \\(pid ${holderPid} \\(postgres for [0-9:]+, idle in transaction: INSERT INTO task_session_messages`));
    // The holder, and only the holder: none of the writers' sessions, which held the table too, for an instant each.
    expect([...sentence.matchAll(/pid (\d+)/g)].map((m) => Number(m[1])), sentence).toEqual([holderPid]);
    expect(sentence).toMatch(/nothing was changed/);
    expect(failures).toEqual([]);
    expect(written.length).toBeGreaterThan(10);
    // The writers' sessions went through the table during the wait (the pool has three connections).
    expect([...writers.pids].some((p) => p !== holderPid)).toBe(true);
    const { rows: [none] } = await db.query(`SELECT to_regclass('public.task_session_subagents') IS NULL AS nothing`);
    expect(none.nothing).toBe(true);

    await holder.query('COMMIT');
    await holder.end();
    const again = await cliThrough(['up']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/installed and activated/);
  }, 120_000);
});
