// Recovery at any size (docs/health.md#reconciliation, docs/reliability.md): `health --full` and `repair`
// read a small constant number of index entries per key, whether a session holds 50 subagents or all of
// them, and health right after a large repair reads what it read before the loss. Counted, not timed (as
// install/backfill-batches.test.ts counts): index entries read from task_session_subagents' indexes and
// task_session_messages' indexes, plus rows read by sequential scans of either. On 8c1724b a key was
// compared with every row, and repaired from every message, of its session (quadratic in a session's
// size), and health after a repair re-checked every key the reconciliation had recorded.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';

const cli = builtCli();
const db = await freshDatabase('recovery_shape');
// Every statement of this file on one connection, whose counts it reports when told to (readsDuring).
const own = await db.connect();
const q = async (sql: string, values?: unknown[]) => (await own.query(sql, values)).rows;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const N = 3_000;  // subagent messages in each layout
const LAYOUTS = { one: 1, spread: 60 } as const;  // sessions they are spread over
type Layout = keyof typeof LAYOUTS;

/** Index entries read from both tables' indexes, and rows read by sequential scans of either, so far. */
async function reads(schema: string): Promise<number> {
  await q('SELECT pg_stat_clear_snapshot()');
  const [r] = await q(`
    SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
             WHERE schemaname = $1 AND relname IN ('task_session_subagents', 'task_session_messages'))
         + (SELECT coalesce(sum(coalesce(seq_tup_read, 0)), 0) FROM pg_stat_user_tables
             WHERE schemaname = $1 AND relname IN ('task_session_subagents', 'task_session_messages')) AS n`, [schema]);
  return Number(r!.n);
}

/**
 * The reads `work` caused. A backend reports its counts when it ends (the CLI's) or when it goes idle after
 * pg_stat_force_next_flush() (this file's): so every statement of this file runs on `own`, which is flushed
 * before and after, the CLI's sessions are waited out, and the count is read until it stops moving.
 */
async function readsDuring(schema: string, work: () => Promise<unknown>): Promise<number> {
  const settled = async () => {
    await own.query('SELECT pg_stat_force_next_flush()');
    await own.query('SELECT 1');
    for (let i = 0; i < 100; i++) {
      const { rows } = await own.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'subagent-context'`);
      if (rows.length === 0) break;
      await sleep(50);
    }
    let last = -1;
    for (let i = 0; i < 50; i++) {
      const now = await reads(schema);
      if (now === last) return now;
      last = now;
      await sleep(200);
    }
    return last;
  };
  const before = await settled();
  await work();
  return (await settled()) - before;
}

const cliOk = async (args: string[], code = 0) => {
  const r = await runCli(cli, args, { DATABASE_URL: db.url });
  expect(r.code, r.stderr).toBe(code);
  return r.stdout;
};

/** `subagent_context_health()` as a dashboard calls it: its shortfall, and the reads it caused. */
async function healthReads(schema: string) {
  let shortfall = -1;
  const n = await readsDuring(schema, async () => {
    shortfall = Number((await q(`SELECT shortfall FROM "${schema}".subagent_context_health()`))[0]!.shortfall);
  });
  return { shortfall, reads: n };
}

const counted: Record<Layout, Record<string, number>> = { one: {}, spread: {} };

for (const [layout, sessions] of Object.entries(LAYOUTS) as Array<[Layout, number]>) {
  await db.createHost(layout);
  await db.up(layout);
  // Statistics stay as they are (no autovacuum, no autoanalyze): no plan of ours may depend on them.
  await q(`ALTER TABLE ${layout}.task_session_subagents SET (autovacuum_enabled = false)`);
  await q(`ALTER TABLE ${layout}.task_session_messages SET (autovacuum_enabled = false)`);
  const [{ since }] = await q(`SELECT ${layout}.subagent_context_parse_key(value)::text AS since FROM ${layout}.kandev_meta
                                WHERE key = 'subagent_context_capture_since'`);
  await q(`
    INSERT INTO ${layout}.tasks (id, title, created_at, updated_at) SELECT 'task-' || s, 't', $1, $1 FROM generate_series(1, ${sessions}) s;
    INSERT INTO ${layout}.task_sessions (id, task_id, started_at, updated_at) SELECT 'session-' || s, 'task-' || s, $1, $1 FROM generate_series(1, ${sessions}) s;
    INSERT INTO ${layout}.task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
      SELECT 'turn-' || s, 'session-' || s, 'task-' || s, $1, $1, $1 FROM generate_series(1, ${sessions}) s;`.replaceAll('$1', `'${since}'`));
  // N subagents since activation, captured: message g in session g % sessions, created one after another.
  await q(`
    INSERT INTO ${layout}.task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
    SELECT 'm' || g, 'session-' || s, 'task-' || s, 'turn-' || s, '', 'tool_call',
           json_build_object('tool_call_id', 'toolu_' || g, 'title', 'Task', 'status', 'pending',
             'normalized', json_build_object('kind', 'subagent_task', 'subagent_task', json_build_object('status', 'async_launched')))::text,
           $1::timestamp + g * interval '1 microsecond', $1::timestamp + g * interval '1 microsecond'
      FROM generate_series(1, ${N}) AS g, LATERAL (SELECT g % ${sessions} + 1 AS s) AS x`, [since]);
}

describe(`${N} subagents in one session and over ${LAYOUTS.spread}: the reads per key`, () => {
  it.each(Object.keys(LAYOUTS) as Layout[])('%s: health --full, the loss of every row, health --full, repair, health, and a hundredth repaired', async (layout) => {
    const c = counted[layout];
    c.fullHealthy = await readsDuring(layout, () => cliOk(['health', '--full', '--schema', layout]));
    const before = await healthReads(layout);
    expect(before.shortfall).toBe(0);
    c.healthBefore = before.reads;
    // Every row lost; the statistics still say the table is empty when repair has filled it again.
    await q(`TRUNCATE ${layout}.task_session_subagents`);
    await q(`ANALYZE ${layout}.task_session_subagents`);
    c.fullMissing = await readsDuring(layout, () => cliOk(['health', '--full', '--schema', layout], 1));
    c.repair = await readsDuring(layout, async () => {
      expect(JSON.parse(await cliOk(['repair', '--json', '--schema', layout]))).toMatchObject({ repaired: N, shortfall: 0 });
    });
    const after = await healthReads(layout);
    expect(after.shortfall).toBe(0);
    c.healthAfter = after.reads;
    // Later (statistics up to date, as autovacuum leaves them), a hundredth lost, in every session: repair
    // looks those keys up where a comparison saw their messages.
    await q(`ANALYZE ${layout}.task_session_subagents, ${layout}.task_session_messages`);
    await q(`DELETE FROM ${layout}.task_session_subagents WHERE substr(tool_call_id, 7)::int % 100 = 0`);
    await cliOk(['health', '--full', '--schema', layout], 1);
    c.repairHundredth = await readsDuring(layout, async () => {
      expect(JSON.parse(await cliOk(['repair', '--json', '--schema', layout]))).toMatchObject({ repaired: N / 100, shortfall: 0 });
    });
  }, 300_000);

  it('each reads a small constant per key, and one session at most ~1.5x what 60 do', () => {
    // Per key of history: the comparisons, the repair of every row, and the repair of a hundredth too, which
    // compares everything written up to its call first (so it stores all that health --full would find).
    const perKey = { fullHealthy: N, fullMissing: N, repair: N, repairHundredth: N };
    for (const [phase, keys] of Object.entries(perKey)) {
      for (const layout of Object.keys(LAYOUTS) as Layout[]) {
        expect(counted[layout][phase], `${phase}, ${layout}: entries read for ${keys} keys`).toBeLessThanOrEqual(8 * keys + 100);
      }
      expect(counted.one[phase], `${phase}: one session against ${LAYOUTS.spread}`).toBeLessThanOrEqual(1.5 * counted.spread[phase]! + 100);
    }
  });

  it('health right after the repair reads no more than before the loss', () => {
    for (const layout of Object.keys(LAYOUTS) as Layout[]) {
      expect(counted[layout].healthAfter, layout).toBeLessThanOrEqual(counted[layout].healthBefore! + 10);
    }
  });
});
