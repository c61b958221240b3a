// Health at any size (a): `SELECT * FROM subagent_context_health()` on the large stores (1M and 4M in a
// full run, BENCH_STORES), each with its whole history written since activation (capture_since moved to
// before it, as case 05 does) and the reconciliation run to completion; then the same after 1,000 new
// messages of the traffic mix arrived since that reconciliation. Health's time must not grow with history.
import { QUICK, open, summary, type BenchCase, type Metrics, type Summary } from '../harness.js';
import { largeStores, HEALTH_STORE_SIZES, sizeName } from '../stores.js';
import { activateBeforeHistory, reconcileToCompletion, timedHealth, newTraffic } from '../reconcile.js';

const NEW_MESSAGES = 1000;
const [SMALL, LARGE] = [HEALTH_STORE_SIZES[0], HEALTH_STORE_SIZES[HEALTH_STORE_SIZES.length - 1]];

const kase: BenchCase = {
  id: '08-health-at-size',
  title: `health on ${HEALTH_STORE_SIZES.map(sizeName).join(' and ')} messages written since activation, reconciliation current`,
  targets: [
    { name: `T8 health, ${sizeName(SMALL)}, reconciliation current, ms`, metric: 'health_ms_small', comparator: '<=', limit: 50 },
    { name: `T8 health, ${sizeName(LARGE)}, reconciliation current, ms`, metric: 'health_ms_large', comparator: '<=', limit: 50 },
    { name: `T8 health ${sizeName(LARGE)} / ${sizeName(SMALL)}`, metric: 'health_ratio', comparator: '<=', limit: 1.3 },
    { name: `T8 health, ${sizeName(SMALL)}, 1,000 new messages since, ms`, metric: 'health_new_ms_small', comparator: '<=', limit: 50 },
    { name: `T8 health, ${sizeName(LARGE)}, 1,000 new messages since, ms`, metric: 'health_new_ms_large', comparator: '<=', limit: 50 },
    { name: `T8 health ${sizeName(LARGE)} / ${sizeName(SMALL)}, 1,000 new messages since`, metric: 'health_new_ratio', comparator: '<=', limit: 1.3 },
    { name: 'T8 shortfall + excess', metric: 'shortfall_plus_excess', comparator: '==', limit: 0 },
  ],
  async run(ctx) {
    const stores = await largeStores(ctx, [SMALL, LARGE]);
    const rounds = QUICK ? 3 : 9;
    const metrics: Metrics = {};
    const spread: Record<string, Summary> = {};
    const details: Record<string, unknown> = {};
    let faults = 0;
    for (const [i, store] of stores.entries()) {
      const which = i === 0 ? 'small' : 'large';
      const c = await open(store.url);
      try {
        await activateBeforeHistory(c);
        const rec = await reconcileToCompletion(c, true);  // a complete one, timed
        metrics[`reconcile_s_${which}`] = rec.seconds;
        metrics[`reconcile_messages_per_s_${which}`] = rec.last.messages_compared / rec.seconds;
        const time = async () => {
          await timedHealth(c);  // warm: the first call after a change may plan and read what the next reuses
          const ms: number[] = [];
          let row: Record<string, unknown> = {};
          for (let r = 0; r < rounds; r++) { const h = await timedHealth(c); ms.push(h.ms); row = h.row; }
          return { s: summary(ms), row };
        };
        const current = await time();
        await newTraffic(c, NEW_MESSAGES, 'c8-');
        const after = await time();
        metrics[`messages_${which}`] = store.size;
        metrics[`health_ms_${which}`] = current.s.median;
        metrics[`health_new_ms_${which}`] = after.s.median;
        spread[`health_ms_${which}`] = current.s;
        spread[`health_new_ms_${which}`] = after.s;
        for (const row of [current.row, after.row]) faults += Number(row.shortfall ?? 0) + Number(row.excess ?? 0);
        details[which] = { size: store.size, seedSeconds: store.seedSeconds, reconciliation: rec, health: current.row, healthAfterNew: after.row };
      } finally {
        await c.end();
      }
    }
    metrics.health_ratio = (metrics.health_ms_large as number) / (metrics.health_ms_small as number);
    metrics.health_new_ratio = (metrics.health_new_ms_large as number) / (metrics.health_new_ms_small as number);
    metrics.shortfall_plus_excess = faults;
    return { metrics, spread, details };
  },
};
export default kase;
