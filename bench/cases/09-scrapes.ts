// Health at any size (b): the Prometheus exporter (`subagent-context metrics --listen 127.0.0.1:0`, the
// built CLI as a child process) on the large stores, history written since activation and the
// reconciliation current (case 08 leaves them so; this case makes sure). Per store, scrapes of a running
// exporter with --cache-seconds 0, so that each one is an evaluation on the connection the exporter keeps
// (what Prometheus sees every scrape_interval): the target. The first scrape of each fresh exporter also
// opens that connection and warms a new backend; it is reported apart. Then 20 concurrent scrapes on a
// fresh exporter of the largest store (defaults): every one answered within 1 s, and at most one health
// evaluation running in the database at any moment (pg_stat_activity sampled every 10 ms while they run).
import { QUICK, open, summary, type BenchCase, type Metrics, type Summary } from '../harness.js';
import { largeStores, HEALTH_STORE_SIZES, sizeName } from '../stores.js';
import {
  reconciledSinceHistory, startExporter, scrape, sampling,
} from '../reconcile.js';

const [SMALL, LARGE] = [HEALTH_STORE_SIZES[0], HEALTH_STORE_SIZES[HEALTH_STORE_SIZES.length - 1]];
const CONCURRENT = 20;

/** Backends of this database evaluating health for someone else, now. */
const EVALUATIONS = `SELECT count(*)::int AS running FROM pg_stat_activity
  WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
    AND query ILIKE '%subagent_context_health%'`;

const kase: BenchCase = {
  id: '09-scrapes',
  title: `Prometheus scrapes on ${HEALTH_STORE_SIZES.map(sizeName).join(' and ')} messages; ${CONCURRENT} at once on ${sizeName(LARGE)}`,
  targets: [
    { name: `T9 one scrape of a running exporter, ${sizeName(SMALL)}, ms`, metric: 'scrape_ms_small', comparator: '<=', limit: 50 },
    { name: `T9 one scrape of a running exporter, ${sizeName(LARGE)}, ms`, metric: 'scrape_ms_large', comparator: '<=', limit: 50 },
    { name: `T9 ${CONCURRENT} concurrent scrapes, ${sizeName(LARGE)}: slowest answer, ms`, metric: 'concurrent_slowest_ms', comparator: '<=', limit: 1000 },
    { name: `T9 ${CONCURRENT} concurrent scrapes: all answered with the database up`, metric: 'concurrent_all_up', comparator: '==', limit: true },
    { name: `T9 ${CONCURRENT} concurrent scrapes: health evaluations running at once (max)`, metric: 'concurrent_evaluations_max', comparator: '<=', limit: 1 },
  ],
  async run(ctx) {
    const stores = await largeStores(ctx, [SMALL, LARGE]);
    const starts = QUICK ? 2 : 3;
    const scrapes = QUICK ? 3 : 5;  // after the first, per exporter
    const metrics: Metrics = {};
    const spread: Record<string, Summary> = {};
    const details: Record<string, unknown> = {};
    for (const [i, store] of stores.entries()) {
      const which = i === 0 ? 'small' : 'large';
      const c = await open(store.url);
      try {
        await reconciledSinceHistory(c);  // as case 08 leaves it
      } finally {
        await c.end();
      }
      const first: number[] = [], steady: number[] = [];
      for (let k = 0; k < starts; k++) {
        const ex = await startExporter(store.url, undefined, ['--cache-seconds', '0']);
        try {
          for (let n = 0; n <= scrapes; n++) {
            const a = await scrape(ex.url);
            if (!/^subagent_context_up\{[^}]*\} 1$/m.test(a.body)) throw new Error(`bench: scrape of ${sizeName(store.size)} without the database: ${a.body.slice(0, 300)}`);
            (n === 0 ? first : steady).push(a.ms);
            // Past the second after an evaluation that the exporter gives the reconciliation (after-evaluation.ts).
            await new Promise((r) => setTimeout(r, 1200));
          }
        } finally {
          await ex.stop();
        }
      }
      metrics[`scrape_ms_${which}`] = summary(steady).median;
      metrics[`first_scrape_ms_${which}`] = summary(first).median;
      spread[`scrape_ms_${which}`] = summary(steady);
      spread[`first_scrape_ms_${which}`] = summary(first);
    }

    const large = stores[stores.length - 1];
    const ex = await startExporter(large.url);
    try {
      const { result, samples } = await sampling<Awaited<ReturnType<typeof scrape>>[], { running: number }>(
        large.url, EVALUATIONS, [], 10, () => Promise.all([...Array(CONCURRENT).keys()].map(() => scrape(ex.url))));
      const ms = result.map((r) => r.ms);
      metrics.concurrent_slowest_ms = Math.max(...ms);
      metrics.concurrent_median_ms = summary(ms).median;
      metrics.concurrent_all_up = result.every((r) => r.status === 200 && /^subagent_context_up\{[^}]*\} 1$/m.test(r.body));
      metrics.concurrent_evaluations_max = Math.max(0, ...samples.map((s) => s.running));
      metrics.concurrent_samples = samples.length;
      details.concurrent = { ms, samples: samples.map((s) => s.running) };
    } finally {
      await ex.stop();
    }
    return { metrics, spread, details };
  },
};
export default kase;
