// repair never makes a capture fail, and replays the captures that failed (docs/reliability.md#repair):
// it waits at most briefly for a row that a transaction of kandev still holds and leaves that key for a
// later run instead of holding the rows of its batch meanwhile; every capture failure recorded since
// activation is re-derived from its message as it is now; and a CLI killed with SIGKILL leaves nothing of
// its work running on the server. On 8c1724b a repair waited without limit on a session idle in a
// transaction, kandev's next frame of a row it held gave up (55P03) and the repair then committed that row
// from its older snapshot, which no later repair fixed.
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { freshDatabase, writeUncaptured } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { storedAndDerived } from '../helpers/stored-and-derived.js';
import { quoteIdent } from '#sql';
import { builtCli, runCli } from '../helpers/cli.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const cli = builtCli();
const db = await freshDatabase('repair_waits');
const q = async (sql: string, values?: unknown[]) => (await db.query(sql, values)).rows;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const started: ChildProcess[] = [];
afterAll(() => { for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); });

const pending = (tool_call_id: string) => subagentMetadata({ tool_call_id, status: 'pending', subagent: { status: 'async_launched' } });
const usage = (tool_call_id: string, total_tokens: number) =>
  subagentMetadata({ tool_call_id, status: 'in_progress', subagent: { status: 'running', total_tokens } });

/** The columns derivation decides (install/crash-safety.test.ts compares the same). */

async function health(schema: string) {
  return (await q(`SELECT shortfall::int, failures::int, status FROM ${quoteIdent(schema)}.subagent_context_health()`))[0];
}

/** Starts `subagent-context <args>` as an operator would, without waiting for it. */
function startCommand(args: string[]) {
  const child = spawn(process.execPath, [cli, ...args], { cwd: PACKAGE_ROOT, env: { ...process.env, NO_COLOR: '1', DATABASE_URL: db.url },
    stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let stdout = '', stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

/** The CLI's backend while it runs a statement matching `like` (pg_stat_activity), within `ms`. */
async function cliBackend(like: string, ms = 30_000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) {
    const [row] = await q(`SELECT pid, query_start FROM pg_stat_activity WHERE datname = current_database()
        AND application_name = 'subagent-context' AND state = 'active' AND query LIKE $1`, [like]);
    if (row) return row as { pid: number; query_start: string };
  }
  return undefined;
}

/**
 * An installation in `schema` with two subagents without rows: B's message is older, A's newer (repair walks
 * newest first, and A's key sorts first: A is stored before repair meets B either way).
 */
async function twoMissing(schema: string) {
  await db.createHost(schema);
  await db.up(schema);
  const t = await createTurn(db.pool, schema, schema);
  await writeUncaptured(db, schema, { id: 'b', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:01', metadata: pending('toolu_b') });
  await writeUncaptured(db, schema, { id: 'a', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:02', metadata: pending('toolu_a') });
  expect(await health(schema)).toMatchObject({ shortfall: 2, failures: 0 });
}

describe('a repair that meets a row kandev still holds', async () => {
  await twoMissing('held');

  it('stores what it can, leaves the held key, and never makes kandev\'s next frame fail', async () => {
    // kandev opens a transaction, writes B's next frame (its capture inserts B's row, uncommitted) and stays idle.
    const idle: pg.Client = await db.connect();
    await idle.query('BEGIN');
    await updateMessage(idle, 'held', 'b', usage('toolu_b', 77), '2099-01-01 00:00:03');
    const writer: pg.Client = await db.connect();
    await writer.query(`SET statement_timeout = '2s'`);
    try {
      const repair = startCommand(['repair', '--json', '--schema', 'held']);
      expect(await cliBackend('%subagent_context_repair(%'), 'repair reached its first batch').toBeDefined();
      // Meanwhile kandev's next frame of A, with usage: it commits, within its statement_timeout.
      await sleep(800);
      const t0 = performance.now();
      await updateMessage(writer, 'held', 'a', usage('toolu_a', 1234), '2099-01-01 00:00:04');
      const waited = performance.now() - t0;
      const ended = await Promise.race([repair.exited, sleep(20_000).then(() => 'still waiting on the idle session')]);
      expect(ended, repair.stderr()).toBe(0);
      // A's frame was captured (no failure recorded) and A's row is what the message says now.
      expect(await q(`SELECT message_id, sqlstate FROM held.subagent_context_failures`)).toEqual([]);
      const a = await storedAndDerived(db, 'held', 'toolu_a');
      expect(a.stored).toEqual(a.derived);
      expect(a.stored).toMatchObject([{ total_tokens: 1234n }]);
      expect(waited).toBeLessThan(1000);
      // B is still missing (its row is the idle transaction's), and repair said so.
      expect(JSON.parse(repair.stdout())).toMatchObject({ shortfall: 1, status: 'shortfall' });
      expect(await q(`SELECT tool_call_id FROM held.subagent_context_missing()`)).toEqual([{ tool_call_id: 'toolu_b' }]);
    } finally {
      await idle.query('COMMIT');
    }
    // The idle session ends: B has the row its frame wrote.
    const b = await storedAndDerived(db, 'held', 'toolu_b');
    expect(b.stored).toEqual(b.derived);
    expect(b.stored).toMatchObject([{ total_tokens: 77n }]);
    expect(await health('held')).toMatchObject({ shortfall: 0, failures: 0, status: 'healthy' });
  });
});

describe('a batch that puts a held key back says so, and the next batch checks it first', async () => {
  await twoMissing('putback');
  const recorded = async () => (await q(`SELECT tool_call_id FROM putback.subagent_context_missing_keys ORDER BY 1`)).map((r) => r.tool_call_id);

  it('put_back is true only then; recheck => false skips the check, the default finds the key stored since', async () => {
    // kandev's open transaction writes B's next frame: its capture inserted B's row, not committed yet.
    const idle: pg.Client = await db.connect();
    await idle.query('BEGIN');
    await updateMessage(idle, 'putback', 'b', usage('toolu_b', 77), '2099-01-01 00:00:03');
    let cursor: unknown[];
    try {
      const [first] = await q(`SELECT repaired::int, held::int, more, put_back, next_created_at::text, next_key FROM putback.subagent_context_repair()`);
      expect(first).toMatchObject({ repaired: 1, held: 1, more: true, put_back: true });
      expect(await recorded()).toEqual(['toolu_b']);
      cursor = [first.next_created_at, first.next_key];
      // A caller that knows nothing was put back skips the check: B stays recorded, and nothing is left below the cursor.
      expect(await q(`SELECT repaired::int, held::int, more, put_back FROM putback.subagent_context_repair($1, $2, true, false)`, cursor))
        .toEqual([{ repaired: 0, held: 0, more: false, put_back: false }]);
      expect(await recorded()).toEqual(['toolu_b']);
    } finally {
      await idle.query('COMMIT');
    }
    // B's row is committed now: the check (the default) finds it stored and drops the key.
    expect(await q(`SELECT repaired::int, more, put_back FROM putback.subagent_context_repair($1, $2)`, cursor))
      .toEqual([{ repaired: 0, more: false, put_back: false }]);
    expect(await recorded()).toEqual([]);
    expect(await health('putback')).toMatchObject({ shortfall: 0, failures: 0, status: 'healthy' });
  });
});

describe('a capture that failed is replayed by the next repair', async () => {
  await db.createHost('replay');
  await db.up('replay');
  const t = await createTurn(db.pool, 'replay', 'replay');
  await insertMessage(db.pool, 'replay', { id: 'r', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:01', metadata: pending('toolu_r') });

  it('the frame commits, the failure is recorded and counted; repair re-derives the row and marks it replayed', async () => {
    // Another session holds the row's lock longer than capture waits (200 ms) while kandev writes a frame with usage.
    const locker: pg.Client = await db.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT 1 FROM replay.task_session_subagents WHERE tool_call_id = 'toolu_r' FOR UPDATE`);
    const writer: pg.Client = await db.connect();
    await writer.query(`SET statement_timeout = '2s'`);
    await updateMessage(writer, 'replay', 'r', usage('toolu_r', 1234), '2099-01-01 00:00:02');
    await locker.query('COMMIT');
    expect(await q(`SELECT message_id, sqlstate FROM replay.subagent_context_failures`)).toEqual([{ message_id: 'r', sqlstate: '55P03' }]);
    const before = await storedAndDerived(db, 'replay', 'toolu_r');
    expect(before.stored).toMatchObject([{ total_tokens: null }]);
    expect(before.derived).toMatchObject([{ total_tokens: 1234n }]);
    expect(await health('replay')).toMatchObject({ shortfall: 0, failures: 1 });

    const r = await runCli(cli, ['repair', '--json', '--schema', 'replay'], { DATABASE_URL: db.url });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 0, replayed: 1, classified: 0, shortfall: 0, status: 'healthy', stays: { held: 0, stale_failures: 0, key_too_long: 0, value_not_storable: 0, missing_key_too_long: 0, missing_reused_tool_call_id: 0 } });
    const after = await storedAndDerived(db, 'replay', 'toolu_r');
    expect(after.stored).toEqual(after.derived);
    expect(await health('replay')).toMatchObject({ shortfall: 0, failures: 0, status: 'healthy' });
    expect(await q(`SELECT message_id, replayed_at IS NOT NULL AS replayed FROM replay.subagent_context_failures`))
      .toEqual([{ message_id: 'r', replayed: true }]);
    // Replayed once: the next repair has nothing to replay.
    const again = await runCli(cli, ['repair', '--json', '--schema', 'replay'], { DATABASE_URL: db.url });
    expect(JSON.parse(again.stdout)).toMatchObject({ repaired: 0, replayed: 0 });
  });
});

describe('kill -9 of the CLI during a long step: nothing of it runs on, nothing of it is kept', async () => {
  await db.createHost('killed');
  await db.up('killed');
  const t = await createTurn(db.pool, 'killed', 'killed');
  const since = (await q(`SELECT killed.subagent_context_parse_key(value)::text AS t FROM killed.kandev_meta WHERE key = 'subagent_context_capture_since'`))[0].t as string;
  // 50,000 subagent messages of one session since activation, none captured (a bulk load in replica role),
  // and steps of 50,000 messages for the commands started below (new sessions): each step takes seconds.
  const N = 50_000;
  const loader = await db.connect();
  await loader.query('SET session_replication_role = replica');
  await loader.query(`
    INSERT INTO killed.task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
    SELECT 'm' || g, $1, $2, $3, '', 'tool_call',
           json_build_object('tool_call_id', 'toolu_' || g, 'title', 'Task', 'status', 'pending',
             'normalized', json_build_object('kind', 'subagent_task', 'subagent_task',
               json_build_object('status', 'async_launched', 'description', repeat('a long description ', 80))))::text,
           $4::timestamp + g * interval '1 microsecond', $4::timestamp + g * interval '1 microsecond'
      FROM generate_series(1, ${N}) AS g`, [t.session, t.task, t.turn, since]);
  await loader.end();
  // A repair batch of all of them too: a batch is sent with its COMMIT (docs/reliability.md#repair), so a
  // short one that ends within the second before the server notices the client is gone is committed.
  await db.query(`ALTER DATABASE "${db.name}" SET subagent_context.batch_messages = ${N}`);
  await db.query(`ALTER DATABASE "${db.name}" SET subagent_context.repair_keys = ${N}`);
  afterAll(async () => {
    await db.query(`ALTER DATABASE "${db.name}" RESET subagent_context.batch_messages`);
    await db.query(`ALTER DATABASE "${db.name}" RESET subagent_context.repair_keys`);
  });

  /**
   * Starts the command, waits until its backend runs a statement matching `like`, kills the CLI with
   * SIGKILL, and says whether that backend is still there 5 s later.
   */
  async function stillRunningAfterKill(args: string[], like: string) {
    const run = startCommand(args);
    const backend = await cliBackend(like);
    expect(backend, `${args.join(' ')} reached its step`).toBeDefined();
    run.child.kill('SIGKILL');
    await run.exited;
    const gone = async () => (await q(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [backend!.pid])).length === 0;
    for (const end = Date.now() + 5000; Date.now() < end; await sleep(100)) if (await gone()) return false;
    await q(`SELECT pg_terminate_backend($1)`, [backend!.pid]);
    return true;
  }

  it('health --full: its step stops on the server and is rolled back', async () => {
    const before = await q(`SELECT * FROM killed.subagent_context_reconciliations ORDER BY id`);
    expect(await stillRunningAfterKill(['health', '--full', '--schema', 'killed'], '%subagent_context_reconcile(%'),
      'its backend still runs 5 s after the kill').toBe(false);
    // Had the step run on to its end, it would have committed a run and the keys it found.
    expect(await q(`SELECT * FROM killed.subagent_context_reconciliations ORDER BY id`)).toEqual(before);
    expect(await q(`SELECT count(*)::int AS n FROM killed.subagent_context_missing_keys`)).toEqual([{ n: 0 }]);
  });

  it('repair: its batch stops on the server and stores nothing', async () => {
    // Every key recorded missing first, so that repair's first batch stores all 50,000.
    await db.query('CALL killed.subagent_context_reconcile_all()');
    expect(await health('killed')).toMatchObject({ shortfall: N });
    expect(await stillRunningAfterKill(['repair', '--schema', 'killed'], '%subagent_context_repair(%'),
      'its backend still runs 5 s after the kill').toBe(false);
    expect(await q(`SELECT count(*)::int AS n FROM killed.task_session_subagents`)).toEqual([{ n: 0 }]);
  });
});
