// Health at any size (d): one complete reconciliation of the largest store (a new one, started with
// stepped to completion by `subagent_context_reconcile(now)`, as health --full does) while 8 kandev writers
// write the traffic model's live sessions. Reported: messages compared per second; the age of the
// reconciling session's snapshot (pg_stat_activity.backend_xmin, sampled every 100 ms: how long the same
// xmin has been held, and how long its transaction has run); writers blocked by it (pg_blocking_pids);
// and the writers' worst and 99th-percentile write latency with the reconciliation running and without
// (the same writers just before, for as long).
import type pg from 'pg';
import { QUICK, open, now, median, log, type BenchCase, type CaseOutput } from '../harness.js';
import { largeStore, HEALTH_STORE_SIZES, sizeName, benchPlan, relabel } from '../stores.js';
import { createRows } from '../replay.js';
import { executeWrite } from '../../kandev/traffic-write.js';
import { reconciledSinceHistory, reconcileToCompletion, sampling } from '../reconcile.js';

const LARGE = HEALTH_STORE_SIZES[HEALTH_STORE_SIZES.length - 1];
const WRITERS = 8;

/** Writers writing live sessions until `until()` says stop; every write's latency in ms. */
async function writers(url: string, tag: string, until: () => boolean): Promise<number[]> {
  const sessions = benchPlan().sessions.filter((s) => !s.history && !s.abandoned);
  const clients = await Promise.all([...Array(WRITERS).keys()].map(() => open(url)));
  const latencies: number[] = [];
  try {
    await Promise.all(clients.map(async (c, w) => {
      for (let i = 0; !until(); i++) {
        const s = relabel(sessions[(w + i * WRITERS) % sessions.length], `${tag}-${w}-${i}`);
        await createRows(c, s);
        for (const t of s.turns) {
          for (const write of t.writes) {
            if (until()) return;
            if (write.class === 'odd') continue;
            const t0 = now();
            await executeWrite(c, write, { schema: 'public', session: s.session, task: s.task, turn: t.id });
            latencies.push(now() - t0);
          }
        }
      }
    }));
  } finally {
    for (const c of clients) await c.end();
  }
  return latencies;
}

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? NaN;

interface Sample { xmin: string | null; state: string | null; xact_ms: number | null; blocked: number }

const kase: BenchCase = {
  id: '11-reconciliation',
  title: `a complete reconciliation of ${sizeName(LARGE)} messages with ${WRITERS} kandev writers`,
  targets: [
    { name: 'T11 oldest snapshot of the reconciling session (backend_xmin held), ms', metric: 'snapshot_age_max_ms', comparator: '<=', limit: 5000 },
    { name: 'T11 writers blocked by the reconciliation, longest (sampled every 100 ms), ms', metric: 'blocked_max_ms', comparator: '<=', limit: 100 },
    { name: 'T11 worst write latency, with minus without the reconciliation, ms', metric: 'worst_write_delta_ms', comparator: '<=', limit: 100 },
  ],
  async run(ctx): Promise<CaseOutput> {
    const store = await largeStore(ctx, LARGE);
    const rec = await open(store.url);
    try {
      await reconciledSinceHistory(rec);

      // Without: the writers alone (long enough for their worst write to mean something).
      const span = QUICK ? 3000 : 20_000;
      log(`case 11: writers without the reconciliation for ${(span / 1000).toFixed(0)} s`);
      const end = now() + span;
      const without = await writers(store.url, 'c11a', () => now() > end);

      // With: the same writers while a new reconciliation runs to completion, its session sampled.
      const pid = (rec as unknown as { processID: number }).processID;
      let done = false;
      const running = writers(store.url, 'c11b', () => done);
      const { result: full, samples } = await sampling<Awaited<ReturnType<typeof reconcileToCompletion>>, Sample>(store.url,
        `SELECT a.backend_xmin::text AS xmin, a.state, extract(epoch FROM clock_timestamp() - a.xact_start) * 1000 AS xact_ms,
                (SELECT count(*)::int FROM pg_stat_activity AS b WHERE $1::int = ANY (pg_blocking_pids(b.pid))) AS blocked
           FROM pg_stat_activity AS a WHERE a.pid = $1::int`, [pid], 100,
        async () => { try { return await reconcileToCompletion(rec, true); } finally { done = true; } });
      const withRec = await running;

      // How long one xmin was held: from the first sample that showed it to the last.
      let age = 0, since = 0, held: string | null = null, xact = 0, blockedRun = 0, blocked = 0;
      for (const s of samples) {
        if (s.xmin === null) held = null;
        else if (s.xmin !== held) { held = s.xmin; since = s.at; }
        else age = Math.max(age, s.at - since);
        if (s.xmin !== null && s.xact_ms !== null) xact = Math.max(xact, Number(s.xact_ms));
        blockedRun = s.blocked > 0 ? blockedRun + 100 : 0;
        blocked = Math.max(blocked, blockedRun);
      }
      return {
        metrics: {
          messages: store.size,
          reconcile_s: full.seconds, reconcile_steps: full.steps,
          messages_compared: full.last.messages_compared,
          messages_per_s: full.last.messages_compared / full.seconds,
          missing: full.last.missing, excess: full.last.excess,
          snapshot_age_max_ms: age, transaction_age_max_ms: xact, samples: samples.length,
          blocked_max_ms: blocked,
          writes_without: without.length, writes_with: withRec.length,
          worst_write_ms_without: Math.max(...without), worst_write_ms_with: Math.max(...withRec),
          p99_write_ms_without: p99(without), p99_write_ms_with: p99(withRec),
          median_write_ms_without: median(without), median_write_ms_with: median(withRec),
          worst_write_delta_ms: Math.max(...withRec) - Math.max(...without),
        },
        details: { last: full.last },
      };
    } finally {
      await (rec as pg.Client).end();
    }
  },
};
export default kase;
