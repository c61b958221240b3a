// Health at any size (docs/health.md#reconciliation): a reconciliation compares all of history in bounded,
// resumable steps and records what it found; health re-checks those keys and compares only what was written
// since the newest completed reconciliation started (reconciled_at).
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freshDatabase, writeUncaptured } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { quoteIdent } from '#sql';
import { builtCli, runCli } from '../helpers/cli.js';

const db = await freshDatabase('reconciliation');
const frame = (tool_call_id: string) => subagentMetadata({ tool_call_id, status: 'pending', subagent: { status: 'async_launched' } });
const q = async (sql: string, values?: unknown[]) => (await db.query(sql, values)).rows;

async function health(schema: string) {
  return (await q(`SELECT shortfall::int, excess::int, status, reconciled_at::text FROM ${quoteIdent(schema)}.subagent_context_health()`))[0];
}

/**
 * One step, on a connection of its own: `notBefore` (health --full) makes only a run started then or later
 * count; `batch` sets subagent_context.batch_messages for that step.
 */
async function step(schema: string, notBefore: string | null = null, batch?: number) {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    if (batch !== undefined) await c.query(`SELECT set_config('subagent_context.batch_messages', $1, true)`, [String(batch)]);
    const { rows: [r] } = await c.query(
      `SELECT status, completed, messages_compared::int, missing::int FROM ${quoteIdent(schema)}.subagent_context_reconcile($1::timestamp)`,
      [notBefore]);
    await c.query('COMMIT');
    return r;
  } finally {
    await c.end();
  }
}

/** A complete reconciliation of everything written up to now, as `health --full` runs it. */
async function reconcileAll(schema: string, batch?: number) {
  const now = await utcNow();
  let s;
  do s = await step(schema, now, batch); while (s.status === 'stepped');
  return s;
}

/** The UTC clock of the server, as kandev writes created_at. */
async function utcNow(offsetMs = 0): Promise<string> {
  return (await q(`SELECT ((clock_timestamp() AT TIME ZONE 'UTC') + $1 * interval '1 millisecond')::text AS t`, [offsetMs]))[0].t;
}

describe('health after up: a reconciliation is complete, and reconciled_at says when it started', async () => {
  await db.createHost('fresh');
  await db.up('fresh');

  it('up completes one, so health answers from it', async () => {
    const h = await health('fresh');
    expect(h.reconciled_at).not.toBeNull();
    expect(h).toMatchObject({ shortfall: 0, excess: 0, status: 'idle' });
    const runs = await q(`SELECT count(*)::int AS n, bool_and(completed_at IS NOT NULL) AS done FROM fresh.subagent_context_reconciliations`);
    expect(runs).toEqual([{ n: 1, done: true }]);
  });

  it('a step with nothing to do says current, and writes nothing', async () => {
    const before = await q(`SELECT * FROM fresh.subagent_context_reconciliations`);
    expect(await step('fresh')).toMatchObject({ status: 'current', completed: true });
    expect(await q(`SELECT * FROM fresh.subagent_context_reconciliations`)).toEqual(before);
  });
});

describe('a miss since the last reconciliation is found by the next health', async () => {
  await db.createHost('recent');
  await db.up('recent');
  const t = await createTurn(db.pool, 'recent', 'recent', await utcNow());
  await insertMessage(db.pool, 'recent', { id: 'seen', session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame('toolu_seen') });
  await writeUncaptured(db, 'recent', { id: 'missed', session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame('toolu_missed') });

  it('without a new reconciliation', async () => {
    expect(await health('recent')).toMatchObject({ shortfall: 1, status: 'shortfall' });
    expect(await q(`SELECT * FROM recent.subagent_context_missing()`)).toEqual([{ task_session_id: t.session, tool_call_id: 'toolu_missed' }]);
  });

  it('repair stores it, and the shortfall is 0 at once', async () => {
    expect(await q(`SELECT repaired::int, held::int, pending::int FROM recent.subagent_context_repair()`)).toEqual([{ repaired: 1, held: 0, pending: 0 }]);
    expect(await health('recent')).toMatchObject({ shortfall: 0, status: 'healthy' });
  });
});

describe('a miss among older messages is found by the next reconciliation, and stays until repair', async () => {
  await db.createHost('old');
  await db.up('old');
  const since = (await q(`SELECT value FROM old.kandev_meta WHERE key = 'subagent_context_capture_since'`))[0].value as string;
  const t = await createTurn(db.pool, 'old', 'old', await utcNow());
  await insertMessage(db.pool, 'old', { id: 'live', session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame('toolu_live') });
  await new Promise((r) => setTimeout(r, 50));
  // A newer reconciliation, then history written behind it: a bulk load with its old created_at, and a
  // write while the trigger was disabled for a while.
  expect(await reconcileAll('old')).toMatchObject({ status: 'completed' });
  const reconciledAt = (await health('old')).reconciled_at as string;
  const between = (await q(`SELECT ($1::timestamptz AT TIME ZONE 'UTC' + ($2::timestamp - ($1::timestamptz AT TIME ZONE 'UTC')) / 2)::text AS t`,
    [since, reconciledAt]))[0].t as string;
  await writeUncaptured(db, 'old', { id: 'bulk', session: t.session, task: t.task, turn: t.turn, created_at: between, metadata: frame('toolu_bulk') });
  await db.query(`ALTER TABLE old.task_session_messages DISABLE TRIGGER subagent_context_capture`);
  await insertMessage(db.pool, 'old', { id: 'off', session: t.session, task: t.task, turn: t.turn, created_at: between, metadata: frame('toolu_off') });
  await db.query(`ALTER TABLE old.task_session_messages ENABLE TRIGGER subagent_context_capture`);

  it('health does not see them before the next reconciliation (they are older than reconciled_at)', async () => {
    expect(await health('old')).toMatchObject({ shortfall: 0, status: 'healthy', reconciled_at: reconciledAt });
  });

  it('the next reconciliation finds both, and health keeps them in the shortfall', async () => {
    expect(await reconcileAll('old')).toMatchObject({ status: 'completed', missing: 2 });
    const h = await health('old');
    expect(h).toMatchObject({ shortfall: 2, status: 'shortfall' });
    expect(h.reconciled_at > reconciledAt).toBe(true);
    // Still there on every later call (no new reconciliation needed).
    expect(await health('old')).toMatchObject({ shortfall: 2 });
  });

  it('repair clears it at once, without waiting for a reconciliation', async () => {
    const r = await runCli(builtCli(), ['repair', '--schema', 'old', '--json'], { DATABASE_URL: db.url });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 2, shortfall: 0 });
    expect(await health('old')).toMatchObject({ shortfall: 0, status: 'healthy' });
  });
});

describe('a reconciliation stopped part-way resumes and ends as an uninterrupted one does', async () => {
  // Two identical stores: one reconciled in small steps with a step killed in the middle, one at once.
  for (const schema of ['resumed', 'straight']) {
    await db.createHost(schema);
    await db.up(schema);
    const t = await createTurn(db.pool, schema, schema, await utcNow());
    for (let i = 0; i < 12; i++) {
      const m = { id: `m${i}`, session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame(`toolu_${i}`) };
      if (i % 4 === 0) await writeUncaptured(db, schema, m); else await insertMessage(db.pool, schema, m);
    }
    await db.query(`DELETE FROM ${quoteIdent(schema)}.task_session_subagents WHERE tool_call_id = 'toolu_5'`);
    await db.query(`DELETE FROM ${quoteIdent(schema)}.task_session_messages WHERE id = 'm7'`);
  }

  it('records the same keys', async () => {
    const now = await utcNow();
    expect(await step('resumed', now, 3)).toMatchObject({ status: 'stepped' });
    // A step whose session dies before it commits: nothing of it is kept.
    const doomed = await db.connect();
    await doomed.query('BEGIN');
    await doomed.query(`SELECT set_config('subagent_context.batch_messages', '3', true)`);
    await doomed.query(`SELECT * FROM resumed.subagent_context_reconcile($1::timestamp)`, [now]);
    const pid = (await doomed.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    await doomed.end().catch(() => {});
    let s;
    do s = await step('resumed', now, 3); while (s.status === 'stepped');
    expect(s.status).toBe('completed');
    expect(await reconcileAll('straight')).toMatchObject({ status: 'completed' });
    const keys = async (schema: string) => q(`SELECT k.kind, k.tool_call_id FROM ${quoteIdent(schema)}.subagent_context_reconciliation_keys AS k
      JOIN ${quoteIdent(schema)}.subagent_context_reconciliations AS r ON r.id = k.reconciliation_id
     WHERE r.completed_at IS NOT NULL
     UNION ALL
     SELECT 'missing', m.tool_call_id FROM ${quoteIdent(schema)}.subagent_context_missing_keys AS m
     ORDER BY 1, 2`);
    expect(await keys('resumed')).toEqual(await keys('straight'));
    expect(await keys('straight')).toEqual([
      { kind: 'excess', tool_call_id: 'toolu_7' },
      { kind: 'missing', tool_call_id: 'toolu_0' }, { kind: 'missing', tool_call_id: 'toolu_4' },
      { kind: 'missing', tool_call_id: 'toolu_5' }, { kind: 'missing', tool_call_id: 'toolu_8' },
    ]);
    const count = async (schema: string) => (await q(`SELECT messages_compared::int AS n FROM ${quoteIdent(schema)}.subagent_context_reconciliations WHERE completed_at IS NOT NULL`))[0].n;
    expect(await count('resumed')).toBe(await count('straight'));
    expect(await health('resumed')).toMatchObject({ shortfall: 4, excess: 1 });
    expect(await health('straight')).toMatchObject({ shortfall: 4, excess: 1 });
  });

  it('health --full runs one to completion and prints the same verdict', async () => {
    const r = await runCli(builtCli(), ['health', '--full', '--schema', 'straight', '--json'], { DATABASE_URL: db.url });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'shortfall', shortfall: 4, excess: 1 });
  });
});

describe('read-only: health answers from what was recorded, and the reconciliation writes nothing', async () => {
  await db.createHost('ro');
  await db.up('ro');
  const t = await createTurn(db.pool, 'ro', 'ro', await utcNow());
  await writeUncaptured(db, 'ro', { id: 'missed', session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame('toolu_missed') });
  await reconcileAll('ro');

  it('in a read-only transaction', async () => {
    const c = await db.connect();
    await c.query('SET default_transaction_read_only = on');
    const h = (await c.query(`SELECT shortfall::int, status, reconciled_at::text FROM ro.subagent_context_health()`)).rows[0];
    expect(h).toMatchObject({ shortfall: 1, status: 'shortfall' });
    expect((await c.query(`SELECT status FROM ro.subagent_context_reconcile()`)).rows[0].status).toBe('read_only');
    await c.end();
  });
});

describe('the record survives pg_dump and pg_restore', async () => {
  await db.createHost('dumped');
  await db.up('dumped');
  const t = await createTurn(db.pool, 'dumped', 'dumped', await utcNow());
  await writeUncaptured(db, 'dumped', { id: 'missed', session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame('toolu_missed') });
  await reconcileAll('dumped');
  const restored = await freshDatabase('reconciliation_restored');

  // pg_dump refuses a server newer than itself: the system's client may be older than the suite's server.
  const clientMajor = Number(/(\d+)/.exec((await promisify(execFile)('pg_dump', ['--version'])).stdout.replace(/^\D+/, ''))?.[1]);
  const serverMajor = Number((await db.query(`SELECT current_setting('server_version_num')::int / 10000 AS major`)).rows[0].major);
  it.skipIf(!(clientMajor >= serverMajor))('health on the restored database answers the same, from the same reconciliation', async () => {
    const dump = await promisify(execFile)('pg_dump', ['--format=custom', '--schema=dumped', '-f', `/tmp/${restored.name}.dump`, db.url]);
    expect(dump.stderr).toBe('');
    await promisify(execFile)('pg_restore', ['--no-owner', '-d', restored.url, `/tmp/${restored.name}.dump`]);
    const read = async (on: typeof db) =>
      (await on.query(`SELECT shortfall::int, excess::int, status, reconciled_at::text FROM dumped.subagent_context_health()`)).rows[0];
    const before = await read(db);
    expect(before).toMatchObject({ shortfall: 1, status: 'shortfall' });
    expect(before.reconciled_at).not.toBeNull();
    expect(await read(restored)).toEqual(before);
  });
});

describe('nothing extra to schedule: what already calls health keeps the reconciliation current', async () => {
  await db.createHost('kept');
  await db.up('kept');
  const forget = () => db.query(`DELETE FROM kept.subagent_context_reconciliations`);

  it('a health check completes one afterwards', async () => {
    await forget();
    expect((await health('kept')).reconciled_at).toBeNull();
    const r = await runCli(builtCli(), ['health', '--schema', 'kept'], { DATABASE_URL: db.url });
    expect(r.code).toBe(0);
    expect((await health('kept')).reconciled_at).not.toBeNull();
  });

  it('a metrics scrape completes one afterwards', async () => {
    await forget();
    const r = await runCli(builtCli(), ['metrics', '--once', '--schema', 'kept'], { DATABASE_URL: db.url });
    expect(r.code).toBe(0);
    expect((await health('kept')).reconciled_at).not.toBeNull();
  });
});
