// Target 6: the backfill of the 250k and 1M stores (the same stores as case 05), alternating, from an
// empty subagent table and no activation keys each time: messages/s, rows/s, how time scales with the
// store, and the Node process's memory while the one statement runs.
import { QUICK, open, order, summary, pairedRatio, now, type BenchCase } from '../harness.js';
import { largeStores, STORE_SIZES } from '../stores.js';
import { backfill } from '../../src/install.js';

const kase: BenchCase = {
  id: '06-backfill',
  title: `backfill of ${STORE_SIZES.map((s) => `${s / 1000}k`).join(' and ')} messages`,
  targets: [
    { name: 'T6 time large / small (4x the messages)', metric: 'time_ratio', comparator: '<=', limit: 4.4 },
    { name: 'T6 Node peak RSS growth small → large, MB', metric: 'rss_growth_mb', comparator: '<=', limit: 20 },
  ],
  async run(ctx) {
    const stores = await largeStores(ctx, STORE_SIZES);
    const rounds = QUICK ? 2 : 3;
    const secs: number[][] = stores.map(() => []);
    const inserted = stores.map(() => 0);
    const peak = stores.map(() => 0);
    const once = async (i: number) => {
      const c = await open(stores[i].url, 'off');
      await c.query('TRUNCATE task_session_subagents');
      await c.query(`DELETE FROM kandev_meta WHERE key LIKE 'subagent_context_%'`);
      await c.query('CHECKPOINT');
      let p = process.memoryUsage().rss;
      const timer = setInterval(() => { p = Math.max(p, process.memoryUsage().rss); }, 20);
      const t0 = now();
      const res = await backfill(c, 'public');
      const s = (now() - t0) / 1000;
      clearInterval(timer);
      await c.end();
      if (res.status !== 'activated') throw new Error(`bench: backfill ${res.status}: ${res.failure}`);
      inserted[i] = res.inserted;
      peak[i] = Math.max(peak[i], p);
      return s;
    };
    for (let r = 0; r < rounds; r++) for (const i of order(stores.map((_, k) => k), r)) secs[i].push(await once(i));
    const med = secs.map((s) => summary(s).median);
    const scale = pairedRatio(secs[1], secs[0]);
    return {
      metrics: {
        rounds,
        small_messages: stores[0].size, large_messages: stores[1].size,
        small_s: med[0], large_s: med[1],
        small_messages_per_s: stores[0].size / med[0], large_messages_per_s: stores[1].size / med[1],
        small_rows_per_s: inserted[0] / med[0], large_rows_per_s: inserted[1] / med[1],
        small_rows: inserted[0], large_rows: inserted[1],
        time_ratio: scale.median,
        node_peak_rss_mb_small: peak[0] / 2 ** 20, node_peak_rss_mb_large: peak[1] / 2 ** 20,
        rss_growth_mb: (peak[1] - peak[0]) / 2 ** 20,
      },
      spread: { time_ratio: scale, small_s: summary(secs[0]), large_s: summary(secs[1]) },
      details: { seconds: secs.map(summary) },
    };
  },
};
export default kase;
