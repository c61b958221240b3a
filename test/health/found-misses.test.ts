// A found miss is never forgotten (docs/health.md#reconciliation): a (session, tool call) that a health call
// found without its row stays in the shortfall until it has one, whatever reconciliation completes in
// between, and `health --full` compares everything written up to the moment it was called, also what a run
// under way had compared before the miss was written. On 8c1724b a run under way completed without seeing
// such a miss and health went back to healthy (1, then 0), and `health --full` found 2 of the 3 misses below.
import { describe, expect, it } from 'vitest';
import { freshDatabase, writeUncaptured } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { quoteIdent } from '#sql';
import { builtCli, runCli } from '../helpers/cli.js';

const cli = builtCli();
const db = await freshDatabase('found_misses');
const frame = (tool_call_id: string) => subagentMetadata({ tool_call_id, status: 'pending', subagent: { status: 'async_launched' } });
const q = async (sql: string, values?: unknown[]) => (await db.query(sql, values)).rows;

/** subagent_context_health(), as a dashboard calls it (no reconciliation step after it). */
async function health(schema: string) {
  return (await q(`SELECT shortfall::int, status, reconciled_at::text FROM ${quoteIdent(schema)}.subagent_context_health()`))[0];
}

/** The CLI's `health --json` (plain, or with --full): exit status and the object it printed. */
async function healthCli(schema: string, ...args: string[]) {
  const r = await runCli(cli, ['health', '--json', '--schema', schema, ...args], { DATABASE_URL: db.url });
  expect(r.stderr).toBe('');
  return { code: r.code, ...JSON.parse(r.stdout) as { shortfall: number; status: string; reconciled_at: string } };
}

/**
 * One reconciliation step on a connection of its own: `notBefore` (what `health --full` passes) makes only
 * a run started then or later count; `batch`, subagent_context.batch_messages for that step.
 */
async function step(schema: string, opts: { notBefore?: string; batch?: number } = {}) {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    if (opts.batch !== undefined) await c.query(`SELECT set_config('subagent_context.batch_messages', $1, true)`, [String(opts.batch)]);
    const { rows: [r] } = await c.query(
      `SELECT status, started_at::text, compared_through::text FROM ${quoteIdent(schema)}.subagent_context_reconcile($1::timestamp)`,
      [opts.notBefore ?? null]);
    await c.query('COMMIT');
    return r as { status: string; started_at: string; compared_through: string };
  } finally {
    await c.end();
  }
}

/** The server's UTC clock, as kandev writes created_at. */
const utcNow = async (): Promise<string> => (await q(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`))[0].t;
const between = async (a: string, b: string): Promise<string> =>
  (await q(`SELECT ($1::timestamp + ($2::timestamp - $1::timestamp) / 2)::text AS t`, [a, b]))[0].t;
const before = async (a: string): Promise<string> => (await q(`SELECT ($1::timestamp - interval '1 microsecond')::text AS t`, [a]))[0].t;

/** `n` subagent messages, captured, each created now; returns their created_at. */
async function captured(schema: string, t: Awaited<ReturnType<typeof createTurn>>, prefix: string, n: number) {
  const created: string[] = [];
  for (let i = 0; i < n; i++) {
    const at = await utcNow();
    await insertMessage(db.pool, schema, { id: `${prefix}${i}`, session: t.session, task: t.task, turn: t.turn, created_at: at, metadata: frame(`toolu_${prefix}${i}`) });
    created.push(at);
  }
  return created;
}

const missing = async (schema: string) =>
  (await q(`SELECT tool_call_id FROM ${quoteIdent(schema)}.subagent_context_missing() ORDER BY 1`)).map((r) => r.tool_call_id);

describe('a miss written into a range that a reconciliation under way had already compared', async () => {
  await db.createHost('behind');
  await db.up('behind');
  const t = await createTurn(db.pool, 'behind', 'behind', await utcNow());
  const created = await captured('behind', t, 'seen', 10);
  // A run starts (a `health --full` stopped with Ctrl-C leaves one like it) and compares the oldest three.
  const run = await step('behind', { notBefore: await utcNow(), batch: 3 });
  expect(run.status).toBe('stepped');
  expect(run.compared_through > created[1]!).toBe(true);
  // Then a miss, with a created_at in that compared range, after the last completed run started.
  const missedAt = await between(created[0]!, created[1]!);
  await writeUncaptured(db, 'behind', { id: 'missed', session: t.session, task: t.task, turn: t.turn, created_at: missedAt, metadata: frame('toolu_missed') });

  it('plain health reports it (it was created after reconciled_at)', async () => {
    const h = await health('behind');
    expect(h).toMatchObject({ shortfall: 1, status: 'shortfall' });
    expect(h.reconciled_at < missedAt).toBe(true);
  });

  it('the run completes (health\'s background second) and reconciled_at moves past it: health still reports it', async () => {
    const first = await healthCli('behind');
    expect(first).toMatchObject({ code: 1, shortfall: 1 });
    // That call's background second completed the run under way: reconciled_at is its start, after the miss.
    const h = await health('behind');
    expect(h.reconciled_at).toBe(run.started_at);
    expect(h.reconciled_at > missedAt).toBe(true);
    expect(h).toMatchObject({ shortfall: 1, status: 'shortfall' });
    expect(await healthCli('behind')).toMatchObject({ code: 1, shortfall: 1 });
    expect(await healthCli('behind')).toMatchObject({ code: 1, shortfall: 1 });
    expect(await missing('behind')).toEqual(['toolu_missed']);
  });

  it('repair clears it', async () => {
    const r = await runCli(cli, ['repair', '--json', '--schema', 'behind'], { DATABASE_URL: db.url });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 1, shortfall: 0 });
    expect(await health('behind')).toMatchObject({ shortfall: 0, status: 'healthy' });
  });
});

describe('health --full while a reconciliation is unfinished: misses in the oldest history, the newest, and since', async () => {
  await db.createHost('unfinished');
  await db.up('unfinished');
  const since = (await q(`SELECT unfinished.subagent_context_parse_key(value)::text AS t FROM unfinished.kandev_meta WHERE key = 'subagent_context_capture_since'`))[0].t as string;
  const t = await createTurn(db.pool, 'unfinished', 'unfinished', await utcNow());
  await captured('unfinished', t, 'early', 6);
  // A completed reconciliation (the last one), more history, then a run that compared only its oldest part.
  const now = await utcNow();
  let s;
  do s = await step('unfinished', { notBefore: now }); while (s.status === 'stepped');
  expect(s.status).toBe('completed');
  await captured('unfinished', t, 'late', 6);
  const run = await step('unfinished', { notBefore: await utcNow(), batch: 3 });
  expect(run.status).toBe('stepped');
  // The misses: the oldest history since activation (a range that run had compared), the newest history
  // (just before that run started: not compared yet), and now (since the last reconciliation).
  const misses = { oldest: since, newest: await before(run.started_at), recent: await utcNow() };
  expect(run.compared_through > misses.oldest).toBe(true);
  expect(run.compared_through < misses.newest).toBe(true);
  for (const [name, at] of Object.entries(misses)) {
    await writeUncaptured(db, 'unfinished', { id: name, session: t.session, task: t.task, turn: t.turn, created_at: at, metadata: frame(`toolu_${name}`) });
  }

  it('health --full finds all three: exit 1', async () => {
    expect(await healthCli('unfinished', '--full')).toMatchObject({ code: 1, status: 'shortfall', shortfall: 3 });
    expect(await missing('unfinished')).toEqual(['toolu_newest', 'toolu_oldest', 'toolu_recent']);
  });

  it('they stay on later plain health calls, and through the next complete reconciliation', async () => {
    expect(await health('unfinished')).toMatchObject({ shortfall: 3, status: 'shortfall' });
    expect(await healthCli('unfinished')).toMatchObject({ code: 1, shortfall: 3 });
    expect(await healthCli('unfinished')).toMatchObject({ code: 1, shortfall: 3 });
    const again = await utcNow();
    let r;
    do r = await step('unfinished', { notBefore: again, batch: 4 }); while (r.status === 'stepped');
    expect(r.status).toBe('completed');
    expect(await health('unfinished')).toMatchObject({ shortfall: 3, status: 'shortfall' });
  });

  it('repair clears all three: exit 0, shortfall 0', async () => {
    const r = await runCli(cli, ['repair', '--json', '--schema', 'unfinished'], { DATABASE_URL: db.url });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 3, shortfall: 0 });
    expect(await health('unfinished')).toMatchObject({ shortfall: 0, status: 'healthy' });
    expect(await healthCli('unfinished', '--full')).toMatchObject({ code: 0, status: 'healthy', shortfall: 0 });
  });
});

describe('a found miss whose message goes away: deleted, or rewritten as something that is not a subagent call', async () => {
  await db.createHost('gone');
  await db.up('gone');
  const t = await createTurn(db.pool, 'gone', 'gone', await utcNow());
  await captured('gone', t, 'kept', 3);
  // Two misses found while the old history is compared (a --full), so both are recorded ones.
  for (const id of ['deleted', 'rewritten']) {
    await writeUncaptured(db, 'gone', { id, session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame(`toolu_${id}`) });
  }

  it('both are recorded: shortfall 2', async () => {
    expect(await healthCli('gone', '--full')).toMatchObject({ code: 1, shortfall: 2 });
    expect(await missing('gone')).toEqual(['toolu_deleted', 'toolu_rewritten']);
  });

  it('each leaves the shortfall once its message is gone, and nothing else changes', async () => {
    await db.query(`DELETE FROM gone.task_session_messages WHERE id = 'deleted'`);
    expect(await health('gone')).toMatchObject({ shortfall: 1, status: 'shortfall' });
    expect(await missing('gone')).toEqual(['toolu_rewritten']);
    // kandev rewrites a message's metadata in place; as a plain text message it is no subagent call to capture.
    const writer = await db.connect();
    await writer.query('SET session_replication_role = replica');
    await writer.query(`UPDATE gone.task_session_messages SET metadata = '{}' WHERE id = 'rewritten'`);
    await writer.end();
    expect(await health('gone')).toMatchObject({ shortfall: 0, status: 'healthy' });
    // Health is a reader (it writes nothing: docs/health.md#a-reader); the next reconciliation step drops
    // the resolved keys from the record.
    expect(await q(`SELECT count(*)::int AS n FROM gone.subagent_context_missing_keys`)).toEqual([{ n: 2 }]);
    await step('gone');
    expect(await q(`SELECT count(*)::int AS n FROM gone.subagent_context_missing_keys`)).toEqual([{ n: 0 }]);
    expect((await q(`SELECT count(*)::int AS n FROM gone.task_session_subagents`))[0].n).toBe(3);
  });
});
