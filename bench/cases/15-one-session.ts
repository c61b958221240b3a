// Skew: the same 20,000 subagent calls (2,000 in a quick run) in one session and spread over 100, each
// store plain tables (kandev/host.ts) written by kandev/subagent-calls.ts, then `up`. Activation is moved
// to their first message (activateBeforeHistory) and `health --full` run once, so every call is compared
// from then on. Per round, alternating: a tenth of the rows deleted (the same tool calls in both stores,
// chosen by a hash of the tool_call_id, so they fall in every session), `health --full --json` timed (exit
// 1, shortfall = rows deleted: it compares all the calls) and `repair --json` timed (repaired = rows
// deleted). Driven through the CLI. Targets: one session / 100 sessions ≤ 1.5 for each.
import { QUICK, open, log, order, summary, pairedRatio, type BenchCase, type CaseOutput, type Summary } from '../harness.js';
import { createHostTables } from '../../kandev/host.js';
import { writeSubagentCalls } from '../../kandev/subagent-calls.js';
import { up } from '../../src/install.js';
import { activateBeforeHistory, cliJson, cliStartMs } from '../reconcile.js';
import { STORE_BASE } from '../stores.js';

const CALLS = QUICK ? 2_000 : 20_000;
const ROUNDS = QUICK ? 1 : 2;
const STORES = { one: 1, hundred: 100 } as const;
type Store = keyof typeof STORES;
const NAMES = Object.keys(STORES) as Store[];
/** A tenth of the rows, the same tool calls in both stores (ordered by a hash: they fall in every session). */
const DELETE_TENTH = `DELETE FROM task_session_subagents WHERE tool_call_id IN
  (SELECT tool_call_id FROM task_session_subagents ORDER BY md5(tool_call_id) LIMIT ${CALLS / 10})`;


const kase: BenchCase = {
  id: '15-one-session',
  title: `skew: health --full and repair of a tenth of ${CALLS / 1000}k subagent calls in one session against 100 sessions`,
  targets: [
    { name: 'T15 health --full, one session / 100 sessions', metric: 'health_full_ratio', comparator: '<=', limit: 1.5 },
    { name: 'T15 repair, one session / 100 sessions', metric: 'repair_ratio', comparator: '<=', limit: 1.5 },
    { name: 'T15 counts: health --full shortfall = rows deleted = repaired, shortfall 0 after', metric: 'counts_hold', comparator: '==', limit: true },
  ],
  async run(ctx): Promise<CaseOutput> {
    const urls = {} as Record<Store, string>;
    const problems: string[] = [];
    const check = (ok: boolean, what: string) => { if (!ok) { problems.push(what); log(`CHECK FAILED: ${what}`); } };
    for (const s of NAMES) {
      urls[s] = await ctx.freshDatabase(`scbench_skew_${s}`);
      const c = await open(urls[s], 'off');
      try {
        c.on('notice', () => {});
        await createHostTables(c, 'public');
        await writeSubagentCalls(c, 'public', { calls: CALLS, sessions: STORES[s], prefix: 'h', base: STORE_BASE });
        await c.query('ANALYZE');
        const res = await up(c, 'public');
        if (res.backfill.status !== 'activated' || res.backfill.inserted !== CALLS) {
          throw new Error(`bench: up on ${s}: ${res.backfill.status}, ${res.backfill.inserted} of ${CALLS} rows: ${res.backfill.failure}`);
        }
        await activateBeforeHistory(c);
        await c.query('VACUUM ANALYZE');
      } finally {
        await c.end();
      }
      // Every call is now written since activation: one complete reconciliation with every row present.
      const warm = await cliJson(urls[s], ['health', '--full', '--json'], [0, 1]);
      check(warm.code === 0 && warm.out.shortfall === 0, `${s}: health --full with every row: exit ${warm.code}, shortfall ${String(warm.out.shortfall)}`);
    }
    log(`wrote ${CALLS} calls in 1 session and over 100 sessions, up, activation moved before them`);

    const fullS: Record<Store, number[]> = { one: [], hundred: [] };
    const repairS: Record<Store, number[]> = { one: [], hundred: [] };
    let deletedRows = 0;
    const rounds: unknown[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const round: Record<string, unknown> = {};
      for (const s of order(NAMES, r)) {
        const c = await open(urls[s], 'off');
        const deleted = await c.query(DELETE_TENTH)
          .then(async (d) => { await c.query('CHECKPOINT'); return d.rowCount ?? 0; })
          .finally(() => c.end());
        deletedRows = deleted;
        const full = await cliJson(urls[s], ['health', '--full', '--json'], [0, 1]);
        check(full.code === 1 && full.out.shortfall === deleted,
          `${s}: health --full after deleting ${deleted} rows: exit ${full.code}, shortfall ${String(full.out.shortfall)}`);
        const rep = await cliJson(urls[s], ['repair', '--json'], [0]);
        check(rep.out.repaired === deleted && rep.out.shortfall === 0,
          `${s}: repair after deleting ${deleted} rows: repaired ${String(rep.out.repaired)}, shortfall ${String(rep.out.shortfall)}, status ${String(rep.out.status)}`);
        fullS[s].push(full.ms / 1000);
        repairS[s].push(rep.ms / 1000);
        round[s] = { deleted, healthFull: full.out, repair: rep.out, healthFullMs: full.ms, repairMs: rep.ms };
        log(`${s}: ${deleted} rows deleted; health --full ${full.ms.toFixed(0)} ms (shortfall ${String(full.out.shortfall)}), ` +
          `repair ${rep.ms.toFixed(0)} ms (repaired ${String(rep.out.repaired)})`);
      }
      rounds.push(round);
    }
    const fullRatio = pairedRatio(fullS.one, fullS.hundred);
    const repairRatio = pairedRatio(repairS.one, repairS.hundred);
    const med = (x: number[]) => summary(x).median;
    const spread: Record<string, Summary> = {
      health_full_ratio: fullRatio, repair_ratio: repairRatio,
      one_health_full_s: summary(fullS.one), hundred_health_full_s: summary(fullS.hundred),
      one_repair_s: summary(repairS.one), hundred_repair_s: summary(repairS.hundred),
    };
    return {
      metrics: {
        rounds: ROUNDS, calls: CALLS, deleted_rows: deletedRows,
        one_health_full_s: med(fullS.one), hundred_health_full_s: med(fullS.hundred), health_full_ratio: fullRatio.median,
        one_repair_s: med(repairS.one), hundred_repair_s: med(repairS.hundred), repair_ratio: repairRatio.median,
        cli_start_ms: await cliStartMs(),
        counts_hold: problems.length === 0,
      },
      spread,
      details: { problems, rounds },
    };
  },
};
export default kase;
