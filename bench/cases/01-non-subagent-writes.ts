// Target 1: kandev's non-subagent writes (every tool kind with Go-escaped payloads, streamed text,
// permission requests, the bulk completion, deletes), capture installed vs not. Also splits what remains
// into the health index and the trigger's WHEN clause + old-row fetch, measured inside the server.
import { QUICK, alternate, ratios, ratioMetrics, summary, perUnit, measure, openEach, closeAll, each, setSync, order, median, type BenchCase, type Sample } from '../harness.js';
import { smallStores, benchPlan, relabel } from '../stores.js';
import { createRows, writeSession, isOther } from '../replay.js';

const VARIANTS = ['off', 'on', 'index_only'] as const;

const kase: BenchCase = {
  id: '01-non-subagent-writes',
  title: 'non-subagent writes, capture on vs off',
  targets: [
    { name: 'T1 wall, durable', metric: 'wall_ratio_sync_on', comparator: '<=', limit: 1.02 },
    { name: 'T1 server CPU, durable', metric: 'cpu_ratio_sync_on', comparator: '<=', limit: 1.05 },
    { name: 'T1 server CPU, sync off', metric: 'cpu_ratio_sync_off', comparator: '<=', limit: 1.05 },
  ],
  async run(ctx) {
    const urls = await smallStores(ctx);
    const plan = benchPlan();
    // Live sessions of the plan, one per round; each keeps only its non-subagent writes.
    const sessions = plan.sessions.filter((s) => !s.history && !s.abandoned);
    const rounds = QUICK ? 3 : 25;
    const clients = await openEach(VARIANTS, urls);
    let writes = 0;
    const samples = await alternate(VARIANTS, rounds, async (v, sync, round) => {
      const c = clients[v];
      await setSync(c, sync);
      const s = relabel(sessions[round % sessions.length], `c1-${v}-${round}`);
      await createRows(c, s);
      let n = 0;
      const sample = await measure([c], async () => { n = await writeSession(c, s, 'messages', isOther); });
      writes = n;
      return each(sample, n);
    });
    const r = ratios(samples, 'on', 'off');
    const idx = ratios(samples, 'index_only', 'off');

    // Inside the server: every tool-call message case 1 wrote, UPDATEd again with its own document by a
    // PL/pgSQL loop (one statement per row, no round trips, one transaction): backend CPU per UPDATE.
    // `|| ''` makes each value a new, uncompressed text, as a client's parameter is (what a filter pass
    // costs over new and over stored values: bench/probes/filter-on-write.ts).
    const loop = `DO $$ DECLARE r record; BEGIN
      FOR r IN SELECT id, content, requests_input, type, metadata FROM task_session_messages
                WHERE id LIKE 'c1-%' AND type = 'tool_call' ORDER BY id LOOP
        UPDATE task_session_messages SET content = r.content || '', requests_input = r.requests_input, type = r.type,
               metadata = r.metadata || '', updated_at = clock_timestamp() AT TIME ZONE 'UTC' WHERE id = r.id;
      END LOOP; END $$`;
    const counts: Record<string, number> = {};
    for (const v of VARIANTS) {
      await setSync(clients[v], 'off');
      counts[v] = Number((await clients[v].query(`SELECT count(*) AS n FROM task_session_messages WHERE id LIKE 'c1-%' AND type = 'tool_call'`)).rows[0].n);
    }
    const perUpdate: Record<string, number[]> = { off: [], on: [], index_only: [] };
    const loopRounds = QUICK ? 2 : 7;
    for (let k = 0; k < loopRounds; k++) {
      for (const v of order(VARIANTS, k)) {
        const s: Sample = await measure([clients[v]], () => clients[v].query(loop));
        if (k > 0) perUpdate[v].push(s.cpuMs * 1000 / counts[v]);
      }
    }
    await closeAll(clients);
    const m = Object.fromEntries(Object.entries(perUpdate).map(([v, xs]) => [v, median(xs)]));
    return {
      metrics: {
        writes_per_round: writes,
        rounds,
        ...ratioMetrics(r).metrics,
        index_only_cpu_ratio_sync_off: idx.ratio.cpu_off,
        ...perUnit(samples, 1),
        loop_updates: counts.on,
        loop_cpu_us_per_update_off: m.off,
        loop_cpu_us_per_update_index_only: m.index_only,
        loop_cpu_us_per_update_on: m.on,
        loop_when_and_old_row_us: m.on - m.index_only,
        loop_health_index_us: m.index_only - m.off,
      },
      spread: {
        ...ratioMetrics(r).spread, index_only_cpu_ratio_sync_off: idx.spread.cpu_off,
        loop_cpu_us_per_update_off: summary(perUpdate.off), loop_cpu_us_per_update_index_only: summary(perUpdate.index_only),
        loop_cpu_us_per_update_on: summary(perUpdate.on),
      },
      details: { indexOnlySpread: idx.spread },
    };
  },
};
export default kase;
