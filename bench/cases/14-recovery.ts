// Recovery at size: on a copy of the 1M-message large store (100k in a quick run), the backfill and a
// recovery side by side, alternating per round. Driven through the CLI (`backfill`, `health`, `repair`)
// and kandev's own tables, so the case holds whatever the SQL's API becomes.
// - backfill: task_session_subagents truncated, the activation keys deleted, `backfill --json`: rows/s.
// - recovery: activation moved to the store's first message (activateBeforeHistory) and `health --full`
//   run once, so that history is compared and a reconciliation is current; health measured (`health --json`, and
//   `SELECT * FROM subagent_context_health()`); then every row deleted (each one a miss health counts),
//   `health --full --json` timed (exit 1, shortfall = rows deleted), `repair --json` timed (repaired =
//   rows deleted, shortfall 0 after), and health measured again right after, no ANALYZE in between.
// Targets: repair's rows/s at least the backfill's; health right after the repair at most 2x before it.
// The copy is made from the shared store (CREATE DATABASE … TEMPLATE) and dropped after, so the shared
// store is left as it was found.
import type pg from 'pg';
import { QUICK, open, log, now, order, summary, median, pairedRatio, type BenchCase, type CaseOutput, type Summary } from '../harness.js';
import { largeStore, sizeName } from '../stores.js';
import { activateBeforeHistory, cliJson, cliStartMs } from '../reconcile.js';
import { urlFor } from '../../demo/embedded.js';

const SIZE = QUICK ? 100_000 : 1_000_000;
const ROUNDS = QUICK ? 1 : 2;
const HEALTH_CALLS = 5;
const VARIANTS = ['backfill', 'recovery'] as const;

/** `SELECT * FROM subagent_context_health()` timed, or NaN where that function is not what it was. */
async function sqlHealthMs(c: pg.Client): Promise<number> {
  const t0 = now();
  try { await c.query('SELECT * FROM subagent_context_health()'); } catch { return NaN; }
  return now() - t0;
}

/** Health, several times: CLI and SQL interleaved (the first call after a change is the CLI's). */
async function healthTimes(url: string, c: pg.Client): Promise<{ cli: number[]; sql: number[]; codes: number[]; shortfall: unknown[] }> {
  const cli: number[] = [], sql: number[] = [], codes: number[] = [], shortfall: unknown[] = [];
  for (let i = 0; i < HEALTH_CALLS; i++) {
    const h = await cliJson(url, ['health', '--json'], [0, 1]);
    cli.push(h.ms); codes.push(h.code); shortfall.push(h.out.shortfall);
    sql.push(await sqlHealthMs(c));
  }
  return { cli, sql, codes, shortfall };
}

const kase: BenchCase = {
  id: '14-recovery',
  title: `recovery at size: repair of every row of ${sizeName(SIZE)} messages against the backfill, and health right after it`,
  targets: [
    { name: 'T14 repair rows/s / backfill rows/s', metric: 'repair_vs_backfill', comparator: '>=', limit: 1 },
    { name: 'T14 health (CLI) right after the repair / before the loss', metric: 'health_after_vs_before', comparator: '<=', limit: 2 },
    { name: 'T14 counts: health --full shortfall = rows deleted = repaired, shortfall 0 after, health exit 0 around', metric: 'counts_hold', comparator: '==', limit: true },
  ],
  async run(ctx): Promise<CaseOutput> {
    const store = await largeStore(ctx, SIZE);
    const template = new URL(store.url).pathname.slice(1);
    const copy = `scbench_recovery_${SIZE}`;
    const admin = await open(ctx.adminUrl, 'off');
    const t0 = now();
    const { rows: [v] } = await admin.query(`SELECT current_setting('server_version_num')::int AS n`);
    await admin.query(`DROP DATABASE IF EXISTS ${copy} WITH (FORCE)`);
    // FILE_COPY (PostgreSQL 15+): a checkpoint and a copy of the files, not the whole store through the WAL.
    for (let tries = 0; ; tries++) {
      try {
        await admin.query(`CREATE DATABASE ${copy} TEMPLATE ${template}${v.n >= 150000 ? ' STRATEGY = FILE_COPY' : ''}`);
        break;
      } catch (err) {
        if (tries >= 10 || !/being accessed by other users/.test(String(err))) throw err;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    const url = urlFor(ctx.adminUrl, copy);
    log(`copied the ${sizeName(SIZE)} store to ${copy} in ${((now() - t0) / 1000).toFixed(1)} s`);
    const c = await open(url, 'off');
    c.on('notice', () => {});
    const problems: string[] = [];
    const check = (ok: boolean, what: string) => { if (!ok) { problems.push(what); log(`CHECK FAILED: ${what}`); } };
    const backfillS: number[] = [], backfillRows: number[] = [];
    const fullS: number[] = [], repairS: number[] = [], repairRows: number[] = [], deletedRows: number[] = [];
    const beforeCli: number[] = [], afterCli: number[] = [], beforeSql: number[] = [], afterSql: number[] = [];
    const afterFirstCli: number[] = [];
    const rounds: unknown[] = [];
    try {
      const runBackfill = async () => {
        await c.query('TRUNCATE task_session_subagents');
        await c.query(`DELETE FROM kandev_meta WHERE key LIKE 'subagent_context_%'`);
        await c.query('CHECKPOINT');
        const b = await cliJson(url, ['backfill', '--json'], [0]);
        check(b.out.status === 'activated', `backfill status ${String(b.out.status)}`);
        const rows = Number(b.out.inserted);
        backfillS.push(b.ms / 1000); backfillRows.push(rows);
        log(`backfill: ${rows} rows in ${(b.ms / 1000).toFixed(1)} s (${(rows / (b.ms / 1000)).toFixed(0)} rows/s)`);
        return { backfill: b.out, ms: b.ms };
      };
      const runRecovery = async () => {
        await activateBeforeHistory(c);
        // History is now written since activation: one complete reconciliation with every row present.
        const warm = await cliJson(url, ['health', '--full', '--json'], [0, 1]);
        check(warm.code === 0 && warm.out.shortfall === 0, `health --full before the loss: exit ${warm.code}, shortfall ${String(warm.out.shortfall)}`);
        const before = await healthTimes(url, c);
        check(before.codes.every((x) => x === 0), `health before the loss: exits ${before.codes.join(',')}`);
        const { rowCount } = await c.query('DELETE FROM task_session_subagents');
        const deleted = rowCount ?? 0;
        await c.query('CHECKPOINT');
        const full = await cliJson(url, ['health', '--full', '--json'], [0, 1]);
        check(full.code === 1 && full.out.shortfall === deleted,
          `health --full after deleting ${deleted} rows: exit ${full.code}, shortfall ${String(full.out.shortfall)}`);
        const rep = await cliJson(url, ['repair', '--json'], [0]);
        check(rep.out.repaired === deleted && rep.out.shortfall === 0,
          `repair after deleting ${deleted} rows: repaired ${String(rep.out.repaired)}, shortfall ${String(rep.out.shortfall)}, status ${String(rep.out.status)}`);
        const after = await healthTimes(url, c);  // right after: no ANALYZE, nothing else in between
        check(after.codes.every((x) => x === 0), `health right after the repair: exits ${after.codes.join(',')}, shortfalls ${after.shortfall.join(',')}`);
        const repaired = Number(rep.out.repaired);
        deletedRows.push(deleted); fullS.push(full.ms / 1000); repairS.push(rep.ms / 1000); repairRows.push(repaired);
        beforeCli.push(median(before.cli)); afterCli.push(median(after.cli)); afterFirstCli.push(after.cli[0]);
        beforeSql.push(median(before.sql)); afterSql.push(median(after.sql));
        log(`recovery: ${deleted} rows deleted; health --full ${(full.ms / 1000).toFixed(1)} s (shortfall ${String(full.out.shortfall)}), ` +
          `repair ${repaired} in ${(rep.ms / 1000).toFixed(1)} s (${(repaired / (rep.ms / 1000)).toFixed(0)} rows/s); ` +
          `health ${median(before.cli).toFixed(0)} → ${median(after.cli).toFixed(0)} ms (CLI), ` +
          `${median(before.sql).toFixed(1)} → ${median(after.sql).toFixed(1)} ms (SQL)`);
        return { deleted, healthFull: full.out, repair: rep.out, healthBefore: before, healthAfter: after };
      };
      for (let r = 0; r < ROUNDS; r++) {
        const round: Record<string, unknown> = {};
        for (const variant of order(VARIANTS, r)) round[variant] = variant === 'backfill' ? await runBackfill() : await runRecovery();
        rounds.push(round);
      }
      const cliStart = await cliStartMs();
      const rate = (rows: number[], s: number[]) => rows.map((x, i) => x / s[i]);
      const backfillRate = rate(backfillRows, backfillS), repairRate = rate(repairRows, repairS);
      const vsBackfill = pairedRatio(repairRate, backfillRate);
      const healthRatio = pairedRatio(afterCli, beforeCli);
      const healthSqlRatio = pairedRatio(afterSql, beforeSql);
      const med = (x: number[]) => summary(x).median;
      const spread: Record<string, Summary> = {
        repair_vs_backfill: vsBackfill, health_after_vs_before: healthRatio, health_sql_after_vs_before: healthSqlRatio,
        backfill_s: summary(backfillS), repair_s: summary(repairS), health_full_s: summary(fullS),
        backfill_rows_per_s: summary(backfillRate), repair_rows_per_s: summary(repairRate),
        health_before_ms: summary(beforeCli), health_after_ms: summary(afterCli),
        health_sql_before_ms: summary(beforeSql), health_sql_after_ms: summary(afterSql),
      };
      return {
        metrics: {
          rounds: ROUNDS, messages: SIZE, subagent_messages: store.subagentMessages,
          backfill_rows: med(backfillRows), backfill_s: med(backfillS), backfill_rows_per_s: med(backfillRate),
          deleted_rows: med(deletedRows), health_full_s: med(fullS),
          repair_rows: med(repairRows), repair_s: med(repairS), repair_rows_per_s: med(repairRate),
          repair_vs_backfill: vsBackfill.median,
          health_before_ms: med(beforeCli), health_after_ms: med(afterCli), health_after_first_ms: med(afterFirstCli),
          health_after_vs_before: healthRatio.median,
          health_sql_before_ms: med(beforeSql), health_sql_after_ms: med(afterSql), health_sql_after_vs_before: healthSqlRatio.median,
          cli_start_ms: cliStart,
          counts_hold: problems.length === 0,
        },
        spread,
        details: { problems, rounds, copyOf: template },
      };
    } finally {
      await c.end().catch(() => {});
      if (process.env.BENCH_KEEP !== '1') await admin.query(`DROP DATABASE IF EXISTS ${copy} WITH (FORCE)`).catch(() => {});
      await admin.end();
    }
  },
};
export default kase;
