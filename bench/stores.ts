// The databases the cases write into, all on one of kandev's host shapes (BENCH_HOST: 0.91's tables, or
// with BENCH_KANDEV=0.92 kandev's after 0.91) and kandev's traffic model:
// - the small stores: the same history (the model's history sessions, written as kandev writes them) in
//   'off' (no capture), 'on' (`up`: trigger, table, health index, history backfilled), 'index_only'
//   ('on' without the trigger: what the health index alone costs) and 'writer' (kandev's own
//   task_session_subagents and its writer, no capture);
// - the large stores (250k, 1M messages) for backfill and health, seeded set-based: the final state of
//   every message of a traffic plan is a template, and the store is that plan replicated into new
//   sessions (INSERT ... SELECT over generate_series), so its mix is the model's mix.
import type pg from 'pg';
import { createHostTables, createKandevSubagentTable, type HostShape } from '../kandev/host.js';
import { goMarshal } from '../kandev/gojson.js';
import { prose } from '../kandev/payloads.js';
import { seededRandom } from '../kandev/random.js';
import { SHAPE, planTraffic, type TrafficPlan, type Write, type PlannedSession, type PlannedTurn } from '../kandev/traffic-plan.js';
import { writeHistory } from '../kandev/traffic-write.js';
import { up } from '../src/install.js';
import { QUICK, open, log, type Context } from './harness.js';

/** The host shape every case writes to: kandev 0.91's tables, or with BENCH_KANDEV=0.92 kandev's after 0.91. */
export const BENCH_HOST: HostShape = (() => {
  const v = process.env.BENCH_KANDEV ?? '0.91';
  if (v !== '0.91' && v !== '0.92') throw new Error(`BENCH_KANDEV must be 0.91 or 0.92, got "${v}"`);
  return `kandev-${v}` as HostShape;
})();

export const SMALL = ['off', 'on', 'index_only', 'writer'] as const;
export type SmallStore = typeof SMALL[number];

/** The traffic every small store starts from, and that the cases replay (seeded, so identical everywhere). */
export function benchPlan(scale = 1, seed = 20260812): TrafficPlan {
  return planTraffic({ scale, seed, invalidJson: false });
}

export async function smallStores(ctx: Context): Promise<Record<SmallStore, string>> {
  return ctx.shared('small-stores', async () => {
    const plan = benchPlan();
    const urls = {} as Record<SmallStore, string>;
    for (const v of SMALL) {
      const url = await ctx.freshDatabase(`scbench_${v}`);
      const c = await open(url, 'off');
      await createHostTables(c, 'public', { shape: BENCH_HOST });
      await writeHistory(c, 'public', plan);
      if (v === 'writer') await createKandevSubagentTable(c, 'public');
      if (v === 'on' || v === 'index_only') {
        const res = await up(c, 'public');
        if (res.backfill.status !== 'activated') throw new Error(`bench: backfill ${res.backfill.status}: ${res.backfill.failure}`);
      }
      if (v === 'index_only') await c.query('DROP TRIGGER subagent_context_capture ON task_session_messages');
      await c.query('VACUUM ANALYZE');
      await c.end();
      urls[v] = url;
    }
    log('seeded the small stores (kandev 0.91 host, history of the traffic model)');
    return urls;
  });
}

/** One session holding the plan's completed subagent calls, each final frame's report made 50 KB. */
export function completedCalls(): PlannedSession {
  const rnd = seededRandom(50);
  const report = prose(rnd, SHAPE.maxResultText);
  const base = benchPlan().sessions.find((s) => !s.history)!;
  const turns = benchPlan().sessions.flatMap((s) => s.turns).filter((t) => t.subagents.some((a) => a.status === 'completed'))
    .map((t) => {
      const done = new Set(t.subagents.filter((a) => a.status === 'completed').map((a) => `msg-${a.toolCallId}`));
      const writes = t.writes.filter((w) => 'message' in w && done.has(w.message) && w.class === 'subagent').map((w): Write => {
        if (w.op !== 'update' || w.subagent?.agent_status !== 'completed' || !w.metadata) return w;
        const doc = JSON.parse(w.metadata);
        doc.normalized.subagent_task.result_text = report;
        return { ...w, metadata: goMarshal(doc) };
      });
      return { ...t, writes };
    });
  return { ...base, abandoned: false, turns };
}

// ---------------------------------------------------------------------------------------------------
// Per-round copies of planned traffic: new ids for sessions, turns and messages, so every round writes
// the same work into rows of its own.

export interface Unit { session: PlannedSession; turns: PlannedTurn[] }

export function relabel(s: PlannedSession, tag: string): PlannedSession {
  return {
    ...s,
    task: `${tag}-${s.task}`,
    session: `${tag}-${s.session}`,
    turns: s.turns.map((t) => relabelTurn(t, tag)),
  };
}

function relabelTurn(t: PlannedTurn, tag: string): PlannedTurn {
  return { ...t, id: `${tag}-${t.id}`, writes: t.writes.map((w) => relabelWrite(w, tag)) };
}

function relabelWrite(w: Write, tag: string): Write {
  return 'message' in w ? { ...w, message: `${tag}-${w.message}` } : w;
}

// ---------------------------------------------------------------------------------------------------
// Large stores.

interface Template {
  k: number;
  session: number;
  turn: string;
  author: string;
  content: string;
  requestsInput: number;
  type: string;
  metadata: string | null;
  subagent: boolean;
}

/** Every message of a plan in its final state (deleted ones left out), in the order it was created. */
export function templates(plan: TrafficPlan): Template[] {
  const out = new Map<string, Template>();
  const sessions = plan.sessions.filter((s) => !s.abandoned);
  sessions.forEach((s, si) => {
    for (const t of s.turns) {
      for (const w of t.writes) {
        if (w.op === 'delete_message') { out.delete(w.message); continue; }
        if (w.op !== 'insert' && w.op !== 'update') continue;
        const prev = out.get(w.message);
        out.set(w.message, {
          k: 0, session: si, turn: t.id, author: prev?.author ?? (w.op === 'insert' ? w.authorType : 'agent'),
          content: w.content, requestsInput: w.requestsInput, type: w.type, metadata: w.metadata,
          subagent: w.qualifies && !w.noIdentity,
        });
      }
    }
  });
  const list = [...out.values()];
  list.forEach((t, i) => { t.k = i; });
  return list;
}

export const STORE_BASE = '2026-01-01 00:00:00';
/** The two stores the backfill compares (case 06); case 05's health runs on the larger. */
export const STORE_SIZES = QUICK ? [25_000, 100_000] : [250_000, 1_000_000];

/**
 * The stores the health-at-any-size cases (08-11) run on, smallest first: BENCH_STORES=1000000,4000000
 * (what a full run builds), 25k and 100k in a quick run.
 */
export const HEALTH_STORE_SIZES: number[] = process.env.BENCH_STORES
  ? process.env.BENCH_STORES.split(',').map((x) => Number(x.trim())).filter((x) => x > 0).sort((a, b) => a - b)
  : QUICK ? [25_000, 100_000] : [1_000_000, 4_000_000];

/** 1000000 -> '1M', 250000 -> '250k'. */
export function sizeName(n: number): string {
  return n >= 1e6 && n % 1e5 === 0 ? `${n / 1e6}M` : n >= 1000 ? `${Math.round(n / 1000)}k` : String(n);
}

/**
 * A store of `size` messages: the plan's messages replicated into new sessions, replica r's message k
 * created at STORE_BASE + (r * T + k) seconds. Returns how many messages are subagent calls.
 */
export async function seedStore(c: pg.Client, size: number, tmpl: Template[]): Promise<{ subagentMessages: number; sessions: number }> {
  const T = tmpl.length;
  const replicas = Math.ceil(size / T);
  const sessionsPerReplica = Math.max(...tmpl.map((t) => t.session)) + 1;
  await c.query(`CREATE TEMP TABLE tmpl AS
    SELECT * FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[], $8::text[])
      AS t(k, session, turn, author, content, requests_input, type, metadata)`, [
    tmpl.map((t) => t.k), tmpl.map((t) => t.session), tmpl.map((t) => t.turn), tmpl.map((t) => t.author),
    tmpl.map((t) => t.content), tmpl.map((t) => t.requestsInput), tmpl.map((t) => t.type), tmpl.map((t) => t.metadata)]);
  await c.query(`INSERT INTO tasks (id, title, created_at, updated_at)
    SELECT 'r' || r || '-task-' || s, 'card', $2::timestamp, $2::timestamp
      FROM generate_series(0, $1::int - 1) r, generate_series(0, $3::int - 1) s`, [replicas, STORE_BASE, sessionsPerReplica]);
  await c.query(`INSERT INTO task_sessions (id, task_id, started_at, updated_at)
    SELECT 'r' || r || '-ses-' || s, 'r' || r || '-task-' || s, $2::timestamp, $2::timestamp
      FROM generate_series(0, $1::int - 1) r, generate_series(0, $3::int - 1) s`, [replicas, STORE_BASE, sessionsPerReplica]);
  await c.query(`INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
    SELECT 'r' || r || '-' || t.turn, 'r' || r || '-ses-' || t.session, 'r' || r || '-task-' || t.session,
           $2::timestamp, $2::timestamp, $2::timestamp
      FROM generate_series(0, $1::int - 1) r, (SELECT DISTINCT turn, session FROM tmpl) t`, [replicas, STORE_BASE]);
  // In slices, so no one statement holds all of the store's WAL and sort memory.
  const step = Math.max(1, Math.floor(100_000 / T));
  for (let from = 0; from < replicas; from += step) {
    await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, author_id, content,
        requests_input, type, metadata, created_at, updated_at)
      SELECT 'r' || r || '-m' || t.k, 'r' || r || '-ses-' || t.session, 'r' || r || '-task-' || t.session, 'r' || r || '-' || t.turn,
             t.author, '', t.content, t.requests_input, t.type, t.metadata,
             $3::timestamp + (r * $4::int + t.k) * interval '1 second',
             $3::timestamp + (r * $4::int + t.k) * interval '1 second' + interval '5 seconds'
        FROM generate_series($1::int, $2::int) r, tmpl t
       WHERE r * $4::int + t.k < $5::int`, [from, Math.min(replicas, from + step) - 1, STORE_BASE, T, size]);
  }
  await c.query('DROP TABLE tmpl');
  const perReplica = tmpl.filter((t) => t.subagent).length;
  const lastCount = size - (replicas - 1) * T;
  const subagentMessages = (replicas - 1) * perReplica + tmpl.filter((t) => t.subagent && t.k < lastCount).length;
  return { subagentMessages, sessions: replicas * sessionsPerReplica };
}

export interface LargeStore { url: string; size: number; subagentMessages: number; messageShare: Record<string, number>; seedSeconds: number }

/**
 * The large stores, capture installed and activated by `up` (the cases time the backfill again). Each size
 * is built once per run and shared by every case that asks for it (cases that change a store's state set
 * the state they need first).
 */
export async function largeStores(ctx: Context, sizes: number[]): Promise<LargeStore[]> {
  const out: LargeStore[] = [];
  for (const size of sizes) out.push(await largeStore(ctx, size));
  return out;
}

export async function largeStore(ctx: Context, size: number): Promise<LargeStore> {
  return ctx.shared(`large-store-${size}`, async () => {
    const tmpl = templates(benchPlan());
    const share: Record<string, number> = {};
    for (const t of tmpl) share[t.subagent ? 'subagent' : t.type] = (share[t.subagent ? 'subagent' : t.type] ?? 0) + 1 / tmpl.length;
    const url = await ctx.freshDatabase(`scbench_store_${size}`);
    const c = await open(url, 'off');
    const t0 = Date.now();
    await createHostTables(c, 'public', { shape: BENCH_HOST });
    const { subagentMessages } = await seedStore(c, size, tmpl);
    const seeded = Date.now();
    await c.query('ANALYZE');
    const res = await up(c, 'public');
    if (res.backfill.status !== 'activated') throw new Error(`bench: backfill ${res.backfill.status}: ${res.backfill.failure}`);
    await c.query('VACUUM ANALYZE');
    const seconds = (Date.now() - t0) / 1000;
    log(`seeded the store of ${size} messages (${subagentMessages} subagent calls) in ${seconds.toFixed(0)} s ` +
      `(rows ${((seeded - t0) / 1000).toFixed(0)} s, up and vacuum ${((Date.now() - seeded) / 1000).toFixed(0)} s)`);
    await c.end();
    return { url, size, subagentMessages, messageShare: share, seedSeconds: seconds };
  });
}
