// What the health-at-any-size cases (08-11) share: a store whose whole history counts as written since activation with the reconciliation current, new
// traffic written on top, the CLI as a child process, and sampling pg_stat_activity while something runs.
import type pg from 'pg';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/paths.js';
import { now, open } from './harness.js';
import { STORE_BASE, benchPlan, relabel } from './stores.js';
import { createRows, writeSession } from './replay.js';
import type { PlannedSession, Write } from '../kandev/traffic-plan.js';
import { reconcileStep, type ReconcileStep } from '../src/reconcile.js';

/** A step of a run: its counts are there (reconcileToCompletion refuses the statuses without one). */
type RunStep = ReconcileStep & { messages_compared: number; missing: number; excess: number };

/**
 * Steps until a reconciliation completes: when `force`, one that compares everything written up to now
 * (health --full's), else the one in progress, or none when the newest completed one is recent enough
 * ('current'). `maxMessages` is the step's size (subagent_context.batch_messages, on this session).
 * Waits out 'busy' (another session is stepping it: health or the exporter may); refuses 'read_only' and
 * 'not_activated'. Returns its steps, seconds and last row.
 */
export async function reconcileToCompletion(c: pg.ClientBase, force = true, maxMessages = 5000):
  Promise<{ steps: number; seconds: number; last: RunStep }> {
  await c.query(`SELECT set_config('subagent_context.batch_messages', $1, false)`, [String(maxMessages)]);
  const notBefore = force
    ? (await c.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS now`)).rows[0].now as string : null;
  const t0 = now();
  for (let steps = 1; ; steps++) {
    const r = await reconcileStep(c, 'public', notBefore);
    if (r.completed || r.status === 'current') {
      if (r.messages_compared === null || r.missing === null || r.excess === null) throw new Error(`bench: step ${steps} (${r.status}) has no run`);
      return { steps, seconds: (now() - t0) / 1000, last: r as RunStep };
    }
    if (r.status === 'busy') await new Promise((res) => setTimeout(res, 50));
    else if (r.status !== 'stepped') throw new Error(`bench: reconciliation step ${steps}: status ${r.status}`);
    if (now() - t0 > 3_600_000) throw new Error('bench: the reconciliation did not complete within an hour');
  }
}

/**
 * Moves activation (capture_since) to before the store's history (STORE_BASE, where every store's first
 * message is): all of it is then written since activation. Returns whether it moved (then what an earlier
 * reconciliation compared no longer covers it); throws when the store is not activated.
 */
export async function activateBeforeHistory(c: pg.ClientBase): Promise<boolean> {
  const { rows } = await c.query(`SELECT value = to_char($1::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"') AS there
                                    FROM kandev_meta WHERE key = 'subagent_context_capture_since'`, [STORE_BASE]);
  if (rows.length === 0) throw new Error('bench: no subagent_context_capture_since key to move');
  if (rows[0].there) return false;
  await c.query(`UPDATE kandev_meta SET value = to_char($1::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')
                  WHERE key = 'subagent_context_capture_since'`, [STORE_BASE]);
  return true;
}

/** The store with its whole history since activation and a reconciliation current: what cases 09-11 start from. */
export async function reconciledSinceHistory(c: pg.ClientBase): Promise<void> {
  const moved = await activateBeforeHistory(c);
  await reconcileToCompletion(c, moved);
}

/** Health as SQL, timed: milliseconds and its row. */
export async function timedHealth(c: pg.ClientBase): Promise<{ ms: number; row: Record<string, unknown> }> {
  const t0 = now();
  const { rows: [row] } = await c.query('SELECT * FROM subagent_context_health()');
  return { ms: now() - t0, row };
}

let burst = 0;
/**
 * Writes new traffic (the live sessions of the traffic model, as kandev writes them, with new ids) until
 * `messages` new messages exist; returns the writes made.
 */
export async function newTraffic(c: pg.ClientBase, messages: number, tag = 'new'): Promise<number> {
  const sessions = benchPlan().sessions.filter((s) => !s.history && !s.abandoned);
  let inserted = 0, writes = 0;
  for (let i = 0; inserted < messages; i++) {
    const s = relabel(sessions[i % sessions.length], `${tag}${burst}-${i}`);
    await createRows(c, s);
    let left = messages - inserted;
    // Stop inside the session once enough messages exist (its later updates are left out).
    const keep = (w: Write) => (w.op === 'insert' ? left-- > 0 : left > 0) && w.class !== 'odd';
    writes += await writeSession(c, s, 'messages', keep);
    inserted = messages - Math.max(left, 0);
  }
  burst++;
  return writes;
}

/** The built CLI (`npm run bench` builds it first). */
export const CLI = join(PACKAGE_ROOT, 'dist', 'src', 'cli.js');

/** Runs `subagent-context ...args` against `url`; its wall time, exit code and output. */
export function runCli(url: string, args: string[]): Promise<{ ms: number; code: number; stdout: string; stderr: string }> {
  const t0 = now();
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, DATABASE_URL: url, NO_COLOR: '1' }, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => resolve({ ms: now() - t0, code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
  });
}

/**
 * A CLI call that must exit with one of `codes` and print one JSON object (`--json`): its time, exit code
 * and that object; anything else throws with what it printed.
 */
export async function cliJson(url: string, args: string[], codes: number[]): Promise<{ ms: number; code: number; out: Record<string, unknown> }> {
  const r = await runCli(url, args);
  let out: Record<string, unknown> | undefined;
  try { out = JSON.parse(r.stdout); } catch { /* below */ }
  if (!codes.includes(r.code) || !out) {
    throw new Error(`bench: \`subagent-context ${args.join(' ')}\` exited ${r.code} (expected ${codes.join(' or ')}): ` +
      `stdout ${JSON.stringify(r.stdout.slice(0, 2000))} stderr ${JSON.stringify(r.stderr.slice(0, 2000))}`);
  }
  return { ms: r.ms, code: r.code, out };
}

/** The time node takes to start the CLI and print its version: what a CLI time includes besides its work. */
export async function cliStartMs(): Promise<number> {
  const t = [];
  for (let i = 0; i < 3; i++) t.push((await runCli('postgres://unused', ['--version'])).ms);
  return t.sort((a, b) => a - b)[1];
}

export interface Exporter { child: ChildProcess; url: string; stop(): Promise<void> }

/** `subagent-context metrics --listen 127.0.0.1:0` as a child process, once it says where it listens. */
export async function startExporter(url: string, timeoutMs = 300_000, args: string[] = []): Promise<Exporter> {
  const child = spawn(process.execPath, [CLI, 'metrics', '--listen', '127.0.0.1:0', ...args],
    { env: { ...process.env, DATABASE_URL: url, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  const where = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench: the exporter did not listen within ${timeoutMs} ms: ${err}`)), timeoutMs);
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /(http:\/\/[^\s]+\/metrics)/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.stderr!.on('data', (d) => { err += d; });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`bench: the exporter exited (${code}): ${err}`)); });
  });
  return {
    child, url: where,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** One GET, timed: milliseconds, HTTP status and body. */
export async function scrape(url: string): Promise<{ ms: number; status: number; body: string }> {
  const t0 = now();
  const res = await fetch(url);
  const body = await res.text();
  return { ms: now() - t0, status: res.status, body };
}

/**
 * Samples `sql` (one row) on its own connection every `everyMs` while `fn` runs; returns fn's result and
 * the samples.
 */
export async function sampling<T, S>(url: string, sql: string, params: unknown[], everyMs: number, fn: () => Promise<T>):
  Promise<{ result: T; samples: (S & { at: number })[] }> {
  const c = await open(url, 'off');
  const samples: (S & { at: number })[] = [];
  let done = false;
  const loop = (async () => {
    while (!done) {
      const at = now();
      const { rows } = await c.query(sql, params);
      samples.push({ ...(rows[0] as S), at });
      const wait = everyMs - (now() - at);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  })();
  try {
    const result = await fn();
    return { result, samples };
  } finally {
    done = true;
    await loop;
    await c.end();
  }
}

export type { PlannedSession };
