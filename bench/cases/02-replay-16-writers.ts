// Target 2: a realistic session replay (the traffic model's live sessions: text, every tool kind,
// permission requests, subagent calls, bulk completions, deletes, an abandoned session deleted) from 16
// concurrent writers, capture installed vs not. Afterwards, on the capture side: no client error,
// warning, deadlock or recorded failure; the stats identity; the stats moved by what the plan says;
// the stored rows equal a re-derivation from the messages (HISTORY_ROWS).
import type pg from 'pg';
import { QUICK, alternate, ratios, inverse, perUnit, measure, open, setSync, type BenchCase } from '../harness.js';
import { smallStores, benchPlan, relabel } from '../stores.js';
import { createRows, writeSession } from '../replay.js';
import { HISTORY_ROWS } from '../../kandev/subagent-row.js';

const WRITERS = 16;
const VARIANTS = ['off', 'on'] as const;
const DERIVED = `task_session_id, task_id, turn_id, tool_call_id, parent_tool_call_id, subagent_type, description, agent_id,
  child_session_id, model, agent_status, tool_status, is_async, total_tokens, tool_use_count, duration_ms,
  observed_at, settled_at, updated_at`;

async function one(url: string, sql: string): Promise<Record<string, unknown>> {
  const c = await open(url);
  try { return (await c.query(sql)).rows[0]; } finally { await c.end(); }
}

const stats = (url: string) => one(url, `SELECT attempted::float8, skipped_no_identity::float8, persisted::float8, failed::float8,
  anomalous_value::float8 FROM subagent_context_stats()`) as Promise<Record<string, number>>;
const deadlocks = async (url: string) =>
  Number((await one(url, `SELECT deadlocks::float8 AS n FROM pg_stat_database WHERE datname = current_database()`)).n);

const kase: BenchCase = {
  id: '02-replay-16-writers',
  title: 'session replay, 16 writers, capture on vs off',
  targets: [
    { name: 'T2 throughput, durable', metric: 'throughput_ratio_sync_on', comparator: '>=', limit: 0.98 },
    { name: 'T2 throughput, sync off', metric: 'throughput_ratio_sync_off', comparator: '>=', limit: 0.95 },
    { name: 'T2 errors + warnings + deadlocks + failures', metric: 'faults', comparator: '==', limit: 0 },
    { name: 'T2 stats identity', metric: 'stats_identity', comparator: '==', limit: true },
    { name: 'T2 stats moved as planned', metric: 'stats_as_planned', comparator: '==', limit: true },
    { name: 'T2 rows = re-derivation', metric: 'rows_differ_from_derivation', comparator: '==', limit: 0 },
  ],
  async run(ctx) {
    const urls = await smallStores(ctx);
    const plan = benchPlan(QUICK ? 1 : 2, 7);
    const sessions = plan.sessions.filter((s) => !s.history);
    const rounds = QUICK ? 1 : 4;
    let errors = 0;
    let warnings = 0;
    const firstError: string[] = [];
    const conns = {} as Record<typeof VARIANTS[number], pg.Client[]>;
    for (const v of VARIANTS) {
      conns[v] = [];
      for (let w = 0; w < WRITERS; w++) {
        const c = await open(urls[v]);
        c.on('notice', (n) => { if (n.severity === 'WARNING') warnings++; });
        conns[v].push(c);
      }
    }
    const dl0 = { off: await deadlocks(urls.off), on: await deadlocks(urls.on) };
    const stats0 = await stats(urls.on);
    let runsOn = 0;
    let writes = 0;
    const samples = await alternate(VARIANTS, rounds, async (v, sync, round) => {
      const cs = conns[v];
      for (const c of cs) await setSync(c, sync);
      const mine = sessions.map((s) => relabel(s, `c2-${v}-${round}`));
      let n = 0;
      const sample = await measure(cs, () => Promise.all(cs.map(async (c, w) => {
        for (const s of mine.filter((_, i) => i % WRITERS === w)) {
          try {
            await createRows(c, s);
            const k = await writeSession(c, s, 'messages', () => true, { deleteAbandoned: true });
            n += k;
          } catch (err) {
            errors++;
            if (firstError.length < 3) firstError.push((err as Error).message);
          }
        }
      })));
      if (v === 'on') runsOn++;
      writes = n;
      return sample;
    });
    for (const v of VARIANTS) for (const c of conns[v]) await c.end();
    const r = ratios(samples, 'on', 'off');
    const stats1 = await stats(urls.on);
    const delta = Object.fromEntries(Object.keys(stats1).map((k) => [k, stats1[k] - stats0[k]]));
    const expected = { attempted: plan.totals.live.attempted * runsOn, skipped_no_identity: plan.totals.live.skipped_no_identity * runsOn,
      persisted: plan.totals.live.persisted * runsOn, failed: 0, anomalous_value: plan.totals.live.anomalous_value * runsOn };
    const dl = (await deadlocks(urls.off)) - dl0.off + (await deadlocks(urls.on)) - dl0.on;
    const failures = Number((await one(urls.on, 'SELECT count(*)::float8 AS n FROM subagent_context_failures')).n);
    const diff = await one(urls.on, `
      WITH derived AS (SELECT ${DERIVED} FROM ${HISTORY_ROWS} AS h),
           stored AS (SELECT ${DERIVED} FROM task_session_subagents)
      SELECT (SELECT count(*) FROM (SELECT * FROM stored EXCEPT ALL SELECT * FROM derived) x)::float8 AS stored_not_derived,
             (SELECT count(*) FROM (SELECT * FROM derived EXCEPT ALL SELECT * FROM stored) y)::float8 AS derived_not_stored,
             (SELECT count(*) FROM stored)::float8 AS rows`);
    return {
      metrics: {
        writers: WRITERS, writes_per_round: writes, rounds,
        throughput_ratio_sync_on: 1 / r.ratio.wall_on,
        throughput_ratio_sync_off: 1 / r.ratio.wall_off,
        cpu_ratio_sync_on: r.ratio.cpu_on,
        cpu_ratio_sync_off: r.ratio.cpu_off,
        ...Object.fromEntries(Object.entries(perUnit(samples, writes)).filter(([k]) => k.includes('wall'))
          .map(([k, us]) => [k.replace('_wall_us_', '_writes_per_s_'), 1e6 / us])),
        ...Object.fromEntries(Object.entries(perUnit(samples, writes)).filter(([k]) => k.includes('cpu'))),
        errors, warnings, deadlocks: dl, failures_recorded: failures,
        faults: errors + warnings + dl + failures,
        stats_identity: stats1.attempted === stats1.skipped_no_identity + stats1.persisted + stats1.failed,
        stats_as_planned: Object.entries(expected).every(([k, n]) => delta[k] === n),
        rows_stored: Number(diff.rows),
        rows_differ_from_derivation: Number(diff.stored_not_derived) + Number(diff.derived_not_stored),
      },
      spread: {
        throughput_ratio_sync_on: inverse(r.spread.wall_on), throughput_ratio_sync_off: inverse(r.spread.wall_off),
        cpu_ratio_sync_on: r.spread.cpu_on, cpu_ratio_sync_off: r.spread.cpu_off,
      },
      details: { statsDelta: delta, expectedStatsDelta: expected, firstErrors: firstError, derivation: diff },
    };
  },
};
export default kase;
