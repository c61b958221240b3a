// The one harness under bench/cases/*: the server, the databases, the clocks, paired rounds, targets as
// data, the results file and the exit status.
//
// Env: DATABASE_URL (else an embedded PostgreSQL 17 with fsync on, so durable commits are durable),
// BENCH_QUICK=1 (small sizes, few rounds: a smoke run), BENCH_CASES=1,4 (a subset, by number),
// BENCH_STRICT=1 (exit 1 when a target is missed), BENCH_KEEP=1 (keep the scbench_* databases),
// BENCH_KANDEV=0.92 (kandev's tables after 0.91 instead of 0.91's: bench/stores.ts BENCH_HOST).
import pg from 'pg';
import { readFileSync } from 'node:fs';

export const QUICK = process.env.BENCH_QUICK === '1';
export const STRICT = process.env.BENCH_STRICT === '1';
export const SYNC_MODES = ['on', 'off'] as const;
export type SyncMode = typeof SYNC_MODES[number];

const started = now();

export function now(): number {
  return Number(process.hrtime.bigint()) / 1e6; // milliseconds
}

export function log(msg: string): void {
  console.error(`[${((now() - started) / 1000).toFixed(0).padStart(4)}s] ${msg}`);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** A measure over rounds: its median, spread, and the per-round values themselves (`values`). */
export interface Summary { median: number; min: number; max: number; n: number; values?: number[] }

export function summary(xs: number[]): Summary {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length, values: xs };
}

/** 1 / x of a summary (a throughput from a time ratio): min and max swap. */
export function inverse(s: Summary): Summary {
  return summary((s.values ?? [s.min, s.median, s.max]).map((x) => 1 / x));
}

/** The median of per-round ratios a[i] / b[i] (each round ran both back to back), with their spread. */
export function pairedRatio(a: number[], b: number[]): Summary {
  return summary(a.map((x, i) => x / b[i]));
}

/** Variant order for round r: as given, reversed every other round, so neither side always goes first. */
export function order<T>(variants: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...variants] : [...variants].reverse();
}

export function fmt(x: number, digits = 3): string {
  return Number.isFinite(x) ? x.toFixed(digits) : String(x);
}

// ---------------------------------------------------------------------------------------------------
// Connections and clocks.

export async function open(url: string, sync: SyncMode = 'on'): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, application_name: 'subagent-context-bench' });
  // An idle connection ended by the server (the run's closing DROP DATABASE ... WITH (FORCE)) must not
  // end the run before it writes its results; a query's own error still rejects that query.
  c.on('error', () => {});
  await c.connect();
  await setSync(c, sync);
  return c;
}

/** One connection per variant, each to its variant's store. */
export async function openEach<V extends string>(variants: readonly V[], store: Record<V, string>): Promise<Record<V, pg.Client>> {
  const out = {} as Record<V, pg.Client>;
  for (const v of variants) out[v] = await open(store[v]);
  return out;
}

/** `writers` connections per variant, each to its variant's store. */
export async function openMany<V extends string>(variants: readonly V[], store: Record<V, string>, writers: number): Promise<Record<V, pg.Client[]>> {
  const out = {} as Record<V, pg.Client[]>;
  for (const v of variants) out[v] = await Promise.all([...Array(writers).keys()].map(() => open(store[v])));
  return out;
}

/** Closes what openEach or openMany opened. */
export async function closeAll(clients: Record<string, pg.Client | pg.Client[]>): Promise<void> {
  for (const c of Object.values(clients).flat()) await c.end();
}

export async function setSync(c: pg.Client, sync: SyncMode): Promise<void> {
  await c.query(`SET synchronous_commit = ${sync}`);
}

/**
 * CPU time (ns) the server backend behind a connection has used, from /proc/<pid>/schedstat (the server
 * runs on this machine); NaN otherwise. It does not count time spent waiting for a CPU that other work
 * holds, so on a shared machine it is the steadier clock. WAL writer and checkpointer are not counted.
 */
export function serverCpu(c: pg.Client): number {
  try {
    const pid = (c as unknown as { processID: number }).processID;
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

export interface Sample { wallMs: number; cpuMs: number }

/** What one of `units` cost, from a sample that measured them all. */
export function each(sample: Sample, units: number): Sample {
  return { wallMs: sample.wallMs / units, cpuMs: sample.cpuMs / units };
}

/** Wall and summed backend CPU of `fn` over `clients`. */
export async function measure(clients: pg.Client[], fn: () => Promise<unknown>): Promise<Sample> {
  const cpu0 = clients.reduce((a, c) => a + serverCpu(c), 0);
  const t0 = now();
  await fn();
  const wallMs = now() - t0;
  return { wallMs, cpuMs: (clients.reduce((a, c) => a + serverCpu(c), 0) - cpu0) / 1e6 };
}

/**
 * Runs each variant once to warm up, then `rounds` rounds with the variants alternating, per sync mode;
 * returns the samples of each variant under each mode.
 */
export async function alternate<V extends string>(variants: readonly V[], rounds: number,
  run: (variant: V, sync: SyncMode, round: number) => Promise<Sample>): Promise<Record<SyncMode, Record<V, Sample[]>>> {
  const out = {} as Record<SyncMode, Record<V, Sample[]>>;
  let round = 0;
  for (const sync of SYNC_MODES) {
    const got = Object.fromEntries(variants.map((v) => [v, [] as Sample[]])) as Record<V, Sample[]>;
    for (const v of variants) await run(v, sync, round++);
    for (let r = 0; r < rounds; r++) {
      for (const v of order(variants, r)) got[v].push(await run(v, sync, round++));
    }
    out[sync] = got;
  }
  return out;
}

/** Ratios a / b of wall and CPU, per sync mode, as the median of per-round ratios. */
export function ratios(samples: Record<SyncMode, Record<string, Sample[]>>, a: string, b: string) {
  const out: Record<string, number> = {};
  const spread: Record<string, Summary> = {};
  for (const sync of SYNC_MODES) {
    const A = samples[sync][a], B = samples[sync][b];
    const wall = pairedRatio(A.map((s) => s.wallMs), B.map((s) => s.wallMs));
    const cpu = pairedRatio(A.map((s) => s.cpuMs), B.map((s) => s.cpuMs));
    out[`wall_${sync}`] = wall.median;
    out[`cpu_${sync}`] = cpu.median;
    spread[`wall_${sync}`] = wall;
    spread[`cpu_${sync}`] = cpu;
  }
  return { ratio: out, spread };
}

/**
 * The ratios of `ratios()` as metrics named `${prefix}wall_ratio_sync_on`, `${prefix}cpu_ratio_sync_off`, …
 * with their spread under the same names (a case returns both: the table prints the spread beside the
 * value, the results file keeps the per-round ratios).
 */
export function ratioMetrics(r: ReturnType<typeof ratios>, prefix = ''): { metrics: Metrics; spread: Record<string, Summary> } {
  const metrics: Metrics = {};
  const spread: Record<string, Summary> = {};
  for (const [key, s] of Object.entries(r.spread)) {
    const [clock, sync] = key.split('_');
    metrics[`${prefix}${clock}_ratio_sync_${sync}`] = s.median;
    spread[`${prefix}${clock}_ratio_sync_${sync}`] = s;
  }
  return { metrics, spread };
}

/** Median per-unit µs of each variant, wall and CPU, per sync mode (for the table). */
export function perUnit(samples: Record<SyncMode, Record<string, Sample[]>>, units: number) {
  const out: Record<string, number> = {};
  for (const sync of SYNC_MODES) {
    for (const [v, xs] of Object.entries(samples[sync])) {
      out[`${v}_wall_us_${sync}`] = median(xs.map((s) => s.wallMs)) * 1000 / units;
      out[`${v}_cpu_us_${sync}`] = median(xs.map((s) => s.cpuMs)) * 1000 / units;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Cases and targets.

export type Comparator = '<=' | '>=' | '==';

/** A target, as data: `metric` names a key of the case's metrics. */
export interface Target {
  name: string;
  metric: string;
  comparator: Comparator;
  limit: number | boolean | string;
}

export interface TargetResult extends Target {
  case: string;
  value: number | boolean | string | undefined;
  met: boolean;
}

export type Metrics = Record<string, number | boolean | string>;

export interface CaseOutput {
  /** Set when the case could not run here (a missing tool, an API not yet installed): why. No verdicts then. */
  skipped?: string;
  /** Flat named values: what the table shows and the targets read. */
  metrics: Metrics;
  /**
   * Per metric measured over rounds: its spread (min–max) and per-round values. Printed beside the value;
   * kept in the results file so runs can be combined (bench/compare.ts).
   */
  spread?: Record<string, Summary>;
  /** Anything else worth keeping in the results file (plans, raw samples). */
  details?: Record<string, unknown>;
}

export interface Context {
  adminUrl: string;
  /** A fresh, empty database (dropped and created again); returns its URL. */
  freshDatabase(name: string): Promise<string>;
  /** Databases shared by cases, built once on first use. */
  shared<T>(key: string, build: () => Promise<T>): Promise<T>;
}

export interface BenchCase {
  /** 'NN-name', from the file name: the order cases run in. */
  id: string;
  title: string;
  targets: Target[];
  run(ctx: Context): Promise<CaseOutput>;
}

/** A metric as the table prints it: integers whole, others to 3 significant-ish digits. */
export function show(x: Metrics[string]): string {
  if (typeof x !== 'number') return String(x);
  return Number.isInteger(x) ? String(x) : fmt(x, Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 3);
}

/** min–max over n rounds, or '' for a value not measured over rounds. */
export function spreadText(s: Summary | undefined): string {
  return s ? `${show(s.min)}–${show(s.max)} (${s.n})` : '';
}

export function evaluate(kase: string, targets: Target[], metrics: Metrics): TargetResult[] {
  return targets.map((t) => {
    const value = metrics[t.metric];
    let met = false;
    if (value !== undefined) {
      if (t.comparator === '==') met = value === t.limit;
      else if (typeof value === 'number' && typeof t.limit === 'number') {
        met = t.comparator === '<=' ? value <= t.limit : value >= t.limit;
      }
    }
    return { ...t, case: kase, value, met };
  });
}
