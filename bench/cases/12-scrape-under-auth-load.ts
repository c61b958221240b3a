// The exporter's basic authentication under attack: a running exporter (`subagent-context metrics`, the
// built CLI as a child process, --cache-seconds 0 so that every scrape is an evaluation) with a web config
// file holding one user (a bcrypt hash of cost 10, as docs/security.md's htpasswd line makes), on a small
// installed database. The authorized scraper's credentials have passed once, as Prometheus' have after its
// first scrape. Per round: its scrape alone, then its scrapes (one after another) while 200 requests with
// wrong passwords, all different (a refused pair remembered would not cost a second check), run 100 at a
// time, each on a new connection. The target is the slowest authorized scrape during the load, over every
// round; beside it the exporter's CPU time per round of load and how the wrong requests were answered.
import { request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { createHostTables } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { QUICK, open, now, summary, type BenchCase, type Metrics } from '../harness.js';
import { BENCH_HOST } from '../stores.js';
import { startExporter } from '../reconcile.js';

const WRONG = 200;
const AT_A_TIME = 100;
const PASSWORD = 'scrape-secret';

/** One GET on a connection of its own: milliseconds, status, body. Never rejects: a failed request is status 0. */
function get(url: string, user: string, password: string): Promise<{ ms: number; status: number; body: string }> {
  const t0 = now();
  return new Promise((resolve) => {
    const req = request(url, { agent: false, headers: { Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c) => { body += c; }).on('end', () => resolve({ ms: now() - t0, status: res.statusCode ?? 0, body }));
    });
    req.on('error', () => resolve({ ms: now() - t0, status: 0, body: '' })).end();
  });
}

/** CPU time (ms) a process has used, user and system, from /proc/<pid>/stat; NaN elsewhere. */
function processCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // utime, stime in clock ticks of 10 ms
  } catch {
    return NaN;
  }
}

const up1 = (body: string) => /^subagent_context_up\{[^}]*\} 1$/m.test(body);

const kase: BenchCase = {
  id: '12-scrape-under-auth-load',
  title: `an authorized scrape while ${WRONG} wrong-password requests run ${AT_A_TIME} at a time (basic auth, bcrypt cost 10)`,
  targets: [
    { name: `T12 authorized scrape during ${WRONG} wrong-password requests, slowest, ms`, metric: 'loaded_scrape_slowest_ms', comparator: '<=', limit: 1000 },
    { name: 'T12 every authorized scrape during the load answered with the database up', metric: 'loaded_all_up', comparator: '==', limit: true },
  ],
  async run(ctx) {
    const url = await ctx.freshDatabase('scbench_auth');
    const c = await open(url, 'off');
    try {
      await createHostTables(c, 'public', { shape: BENCH_HOST });
      const res = await up(c, 'public');
      if (res.backfill.status !== 'activated') throw new Error(`bench: backfill ${res.backfill.status}: ${res.backfill.failure}`);
    } finally {
      await c.end();
    }
    const dir = mkdtempSync(join(tmpdir(), 'scbench-auth-'));
    const config = join(dir, 'web.yml');
    writeFileSync(config, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync(PASSWORD, 10)}'\n`);
    const rounds = QUICK ? 2 : 5;
    const alone: number[] = [], slowest: number[] = [], cpu: number[] = [], loadMs: number[] = [];
    const answers: Record<string, number> = {};
    let allUp = true;
    const ex = await startExporter(url, undefined, ['--cache-seconds', '0', '--web-config-file', config]);
    try {
      const first = await get(ex.url, 'prometheus', PASSWORD); // passes once, as Prometheus' first scrape does
      if (first.status !== 200 || !up1(first.body)) throw new Error(`bench: the authorized scrape was answered ${first.status}: ${first.body.slice(0, 300)}`);
      for (let r = 0; r < rounds; r++) {
        const quiet = await get(ex.url, 'prometheus', PASSWORD);
        if (quiet.status !== 200 || !up1(quiet.body)) throw new Error(`bench: the authorized scrape was answered ${quiet.status}`);
        alone.push(quiet.ms);

        let next = 0, done = false;
        const cpu0 = processCpuMs(ex.child.pid!);
        const t0 = now();
        const load = Promise.all([...Array(AT_A_TIME).keys()].map(async () => {
          while (next < WRONG) {
            const a = await get(ex.url, 'prometheus', `wrong-${r}-${next++}`);
            answers[a.status] = (answers[a.status] ?? 0) + 1;
          }
        })).then(() => { done = true; loadMs.push(now() - t0); });
        const during: number[] = [];
        await new Promise((resolve) => setTimeout(resolve, 50)); // the first hundred are on their way
        do {
          const a = await get(ex.url, 'prometheus', PASSWORD);
          during.push(a.ms);
          if (a.status !== 200 || !up1(a.body)) allUp = false;
        } while (!done);
        await load;
        cpu.push(processCpuMs(ex.child.pid!) - cpu0);
        slowest.push(Math.max(...during));
        await new Promise((resolve) => setTimeout(resolve, 500)); // what was admitted finishes before the next round
      }
    } finally {
      await ex.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    const metrics: Metrics = {
      alone_scrape_ms: summary(alone).median,
      loaded_scrape_slowest_ms: Math.max(...slowest),
      loaded_scrape_slowest_median_ms: summary(slowest).median,
      loaded_all_up: allUp,
      load_ms: summary(loadMs).median,
      exporter_cpu_ms_per_load: summary(cpu).median,
      ...Object.fromEntries(Object.entries(answers).map(([status, n]) => [`wrong_answered_${status}`, n])),
    };
    return {
      metrics,
      spread: { alone_scrape_ms: summary(alone), loaded_scrape_slowest_median_ms: summary(slowest), load_ms: summary(loadMs), exporter_cpu_ms_per_load: summary(cpu) },
      details: { rounds, alone, slowest, loadMs, cpu, answers },
    };
  },
};
export default kase;
