// Target 12: Citus against plain tables (docs/citus.md). The same store is built twice on this machine:
// plain tables on the benchmark's server, and kandev's tables distributed on the Citus cluster at
// CITUS_COORDINATOR_URL (a coordinator database that knows its workers: `cluster.sh db NAME` prints one);
// a case without a cluster is skipped. The store: 30,000 subagent calls over 300 sessions written before
// `up` (kandev/subagent-calls.ts: the traffic model's final frames, one message each), then as many made
// since activation, whose rows are deleted before each repair: repair's rate is compared with the backfill's
// on the same number of rows (a gap of a tenth as many was two batches, mostly the first one's start).
// Reported on each, side by side: the first `up` (install and backfill), the backfill alone (rounds of
// rows and activation keys dropped, then backfill() again, as case 06), `health --full`'s reconciliation,
// and `repair` of the deleted rows; and the ratios Citus / plain tables, paired per round. Last, kandev's
// writes while `up` waits behind a transaction open where the rows are (on Citus, on a worker): bench/held-up.ts.
import type pg from 'pg';
import { QUICK, open, now, log, summary, pairedRatio, order, type BenchCase, type CaseOutput, type Summary } from '../harness.js';
import { createCitusDatabase, dropCitusDatabase } from '../../kandev/citus-cluster.js';
import { createHostTables } from '../../kandev/host.js';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';
import { backfill, up } from '../../src/install.js';
import { reconcileAll } from '../../src/reconcile.js';
import { runCli } from '../reconcile.js';
import { upBehindHolder, type HeldUp } from '../held-up.js';

const CALLS = QUICK ? 3_000 : 30_000;
const SESSIONS = QUICK ? 30 : 300;
const MISSING = CALLS;
const ROUNDS = QUICK ? 1 : 3;
const STORES = ['plain', 'citus'] as const;
type Store = typeof STORES[number];

const seconds = async (fn: () => Promise<unknown>) => { const t0 = now(); await fn(); return (now() - t0) / 1000; };

/** `subagent-context repair --json` (the command an operator runs): how many rows it stored, and how long its store part took. */
async function repair(url: string): Promise<{ repaired: number; storeSeconds: number }> {
  const res = await runCli(url, ['repair', '--json']);
  if (res.code !== 0) throw new Error(`bench: repair exited ${res.code}: ${res.stderr.trim()}`);
  const out = JSON.parse(res.stdout) as { repaired: number; seconds: { store: number } };
  return { repaired: out.repaired, storeSeconds: out.seconds.store };
}

const kase: BenchCase = {
  id: '13-citus',
  title: `Citus against plain tables: backfill of ${CALLS / 1000}k subagent calls over ${SESSIONS} sessions, repair of ${MISSING / 1000}k`,
  targets: [
    { name: 'T12 backfill on Citus / on plain tables', metric: 'backfill_ratio', comparator: '<=', limit: 3 },
    { name: 'T12 repair on Citus / on plain tables', metric: 'repair_ratio', comparator: '<=', limit: 3 },
    { name: 'T12 kandev\'s longest write while up waits behind a worker\'s transaction (ms)', metric: 'citus_held_write_max_ms', comparator: '<=', limit: 2000 },
    // Repair is the backfill's derivation applied to the missing keys: it stores at least half its rate.
    { name: 'T12 repair rate / backfill rate on Citus', metric: 'citus_repair_backfill_rate', comparator: '>=', limit: 0.5 },
  ],
  async run(ctx): Promise<CaseOutput> {
    const coordinator = process.env.CITUS_COORDINATOR_URL;
    if (!coordinator) return { skipped: 'no Citus cluster: set CITUS_COORDINATOR_URL to a coordinator database (docs/citus.md)', metrics: {} };
    const citusName = 'scbench_citus';
    await dropCitusDatabase(coordinator, citusName);
    const citus = await createCitusDatabase(coordinator, citusName);
    const urls: Record<Store, string> = { plain: await ctx.freshDatabase('scbench_citus_plain'), citus: citus.url };
    const c = {} as Record<Store, pg.Client>;
    try {
      for (const s of STORES) {
        c[s] = await open(urls[s], 'off');
        c[s].on('notice', () => {});
        await createHostTables(c[s], 'public', { citus: s === 'citus' });
        await writeSubagentCalls(c[s], 'public', { calls: CALLS, sessions: SESSIONS, prefix: 'h', base: '2026-01-01 00:00:00' });
        await c[s].query('ANALYZE');
      }
      log(`wrote ${CALLS} calls over ${SESSIONS} sessions on plain tables and on Citus`);

      const upSeconds = {} as Record<Store, number>;
      for (const s of STORES) {
        let inserted = 0;
        upSeconds[s] = await seconds(async () => { inserted = (await up(c[s], 'public')).backfill.inserted; });
        if (inserted !== CALLS) throw new Error(`bench: up on ${s} backfilled ${inserted} of ${CALLS}`);
        log(`up on ${s}: ${upSeconds[s].toFixed(1)} s`);
      }

      const backfillSeconds: Record<Store, number[]> = { plain: [], citus: [] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const s of order(STORES, r)) {
          await c[s].query('TRUNCATE task_session_subagents');
          await c[s].query(`DELETE FROM kandev_meta WHERE key LIKE 'subagent_context_%'`);
          let result: Awaited<ReturnType<typeof backfill>> | undefined;
          backfillSeconds[s].push(await seconds(async () => { result = await backfill(c[s], 'public'); }));
          if (result?.status !== 'activated' || result.inserted !== CALLS) throw new Error(`bench: backfill on ${s}: ${result?.status}, ${result?.inserted} rows`);
          log(`backfill on ${s}: ${backfillSeconds[s].at(-1)!.toFixed(1)} s`);
        }
      }

      // Calls made since activation: their rows are what health --full finds missing and repair restores.
      const base = await Promise.all(STORES.map((s) => afterActivation(c[s], 'public'))).then((b) => b.sort().at(-1)!);
      for (const s of STORES) {
        await writeSubagentCalls(c[s], 'public', { calls: MISSING, sessions: SESSIONS, prefix: 'l', sessionsOf: 'h', base, step: '100 microseconds' });
      }
      const fullSeconds: Record<Store, number[]> = { plain: [], citus: [] };
      const repairSeconds: Record<Store, number[]> = { plain: [], citus: [] };
      const storeSeconds: Record<Store, number[]> = { plain: [], citus: [] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const s of order(STORES, r)) {
          const { rowCount } = await c[s].query(`DELETE FROM task_session_subagents WHERE tool_call_id LIKE 'l-call-%'`);
          if (rowCount !== MISSING) throw new Error(`bench: ${s} had ${rowCount} rows of calls since activation, not ${MISSING}`);
          // Rows a trigger missed were never written: the deleted ones' dead tuples are vacuumed here, so that
          // repair does not share the machine with an autovacuum of them (the backfill's rounds truncate).
          await c[s].query('VACUUM task_session_subagents');
          // health --full's reconciliation: compares everything written up to now, even just after another.
          let full: Awaited<ReturnType<typeof reconcileAll>> | undefined;
          fullSeconds[s].push(await seconds(async () => { full = await reconcileAll(c[s], 'public', { now: true }); }));
          if (full?.status !== 'completed' || Number(full.missing) !== MISSING) {
            throw new Error(`bench: health --full's reconciliation on ${s}: ${full?.status}, ${full?.missing} missing, not ${MISSING}`);
          }
          let repaired = 0;
          repairSeconds[s].push(await seconds(async () => {
            const r = await repair(urls[s]);
            repaired = r.repaired;
            storeSeconds[s].push(r.storeSeconds);
          }));
          if (repaired !== MISSING) throw new Error(`bench: repair on ${s} stored ${repaired} of ${MISSING}`);
          log(`health --full on ${s}: ${fullSeconds[s].at(-1)!.toFixed(1)} s, repair ${repairSeconds[s].at(-1)!.toFixed(1)} s`);
        }
      }

      // kandev's writes while `up` waits behind a transaction open where the rows are: on Citus, a worker.
      const held = {} as Record<Store, HeldUp>;
      const workerOf = async (session: string) => {
        const { rows: [r] } = await c.citus.query(
          `SELECT nodename, nodeport FROM citus_shards WHERE table_name = 'task_session_messages'::regclass
              AND shardid = get_shard_id_for_distribution_column('task_session_messages', $1::text)`, [session]);
        return citus.urlOn({ host: r.nodename, port: Number(r.nodeport) });
      };
      for (const s of STORES) {
        held[s] = await upBehindHolder(urls[s], s === 'citus' ? workerOf : async () => urls[s], 'held');
        log(`up behind a transaction open ${s === 'citus' ? 'on a worker' : 'on the server'}: exit ${held[s].up_exit} after ` +
          `${held[s].up_s.toFixed(1)} s; kandev's ${held[s].writes} writes meanwhile: longest ${held[s].write_max_ms.toFixed(0)} ms, ` +
          `median ${held[s].write_median_ms.toFixed(0)} ms, ${held[s].writes_failed} failed`);
      }

      const backfillRatio = pairedRatio(backfillSeconds.citus, backfillSeconds.plain);
      const repairRatio = pairedRatio(repairSeconds.citus, repairSeconds.plain);
      const fullRatio = pairedRatio(fullSeconds.citus, fullSeconds.plain);
      const med = (x: number[]) => summary(x).median;
      const spread: Record<string, Summary> = {
        backfill_ratio: backfillRatio, repair_ratio: repairRatio, health_full_ratio: fullRatio,
        plain_backfill_s: summary(backfillSeconds.plain), citus_backfill_s: summary(backfillSeconds.citus),
        plain_repair_s: summary(repairSeconds.plain), citus_repair_s: summary(repairSeconds.citus),
        plain_health_full_s: summary(fullSeconds.plain), citus_health_full_s: summary(fullSeconds.citus),
      };
      return {
        metrics: {
          rounds: ROUNDS, calls: CALLS, sessions: SESSIONS, missing_rows: MISSING,
          workers: citus.workers.length,
          plain_up_s: upSeconds.plain, citus_up_s: upSeconds.citus, up_ratio: upSeconds.citus / upSeconds.plain,
          plain_backfill_s: med(backfillSeconds.plain), citus_backfill_s: med(backfillSeconds.citus), backfill_ratio: backfillRatio.median,
          plain_health_full_s: med(fullSeconds.plain), citus_health_full_s: med(fullSeconds.citus), health_full_ratio: fullRatio.median,
          plain_repair_s: med(repairSeconds.plain), citus_repair_s: med(repairSeconds.citus), repair_ratio: repairRatio.median,
          ...Object.fromEntries(STORES.flatMap((s) => Object.entries(held[s]).map(([k, v]) => [`${s}_held_${k}`, v]))),
          // Rows per second that repair's store part stores (its `seconds.store`: after the complete
          // comparison it starts with, which health_full_s times) over rows per second the backfill stores.
          plain_repair_store_s: med(storeSeconds.plain), citus_repair_store_s: med(storeSeconds.citus),
          plain_repair_backfill_rate: (MISSING / med(storeSeconds.plain)) / (CALLS / med(backfillSeconds.plain)),
          citus_repair_backfill_rate: (MISSING / med(storeSeconds.citus)) / (CALLS / med(backfillSeconds.citus)),
        },
        spread,
      };
    } finally {
      for (const s of STORES) await c[s]?.end().catch(() => {});
      if (process.env.BENCH_KEEP !== '1') await citus.drop();
    }
  },
};
export default kase;
