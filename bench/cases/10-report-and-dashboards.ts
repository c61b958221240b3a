// Health at any size (c): `subagent-context report --since 1d` (terminal and --json; the built CLI as a
// child process, node's start-up included and reported apart) on the largest store, and every query of
// sql/dashboards/ over the last 24 h on it: windowed files bind $1/$2, Grafana-only files get the macros
// substituted as Grafana would, timeless files (health, stats, metrics) run as they are.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { sqlFile } from '#sql';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { QUICK, open, summary, now, type BenchCase, type Metrics, type Summary } from '../harness.js';
import { largeStore, HEALTH_STORE_SIZES, sizeName } from '../stores.js';
import { reconciledSinceHistory, runCli, cliStartMs } from '../reconcile.js';

const LARGE = HEALTH_STORE_SIZES[HEALTH_STORE_SIZES.length - 1];
const DIR = join(PACKAGE_ROOT, 'sql', 'dashboards');

/** A dashboard file as a statement over [from, to): Grafana's macros substituted, $1/$2 bound when it has them. */
export function panelQuery(file: string, from: string, to: string): { text: string; values: unknown[] } {
  const text = sqlFile(`dashboards/${file}`, 'public')
    .replaceAll('${schema:raw}', 'public')
    .replace(/\$__timeFilter\(([^)]+)\)/g, (_, col) => `${col} BETWEEN '${from}' AND '${to}'`)
    .replace(/\$__timeGroupAlias\(([^,]+),\s*([0-9]+)h\)/g,
      (_, col, h) => `floor(extract(epoch from ${col})/${Number(h) * 3600})*${Number(h) * 3600} AS "time"`)
    .replaceAll('$__timeFrom()', `'${from}'`).replaceAll('$__timeTo()', `'${to}'`);
  return { text, values: /\$[12]\b/.test(text) ? [from, to] : [] };
}

const kase: BenchCase = {
  id: '10-report-and-dashboards',
  title: `report --since 1d and every dashboard query over 24 h on ${sizeName(LARGE)} messages`,
  targets: [
    { name: `T10 report --since 1d, ${sizeName(LARGE)}, ms (the whole command)`, metric: 'report_ms', comparator: '<=', limit: 1000 },
    { name: `T10 report --json --since 1d, ${sizeName(LARGE)}, ms`, metric: 'report_json_ms', comparator: '<=', limit: 1000 },
    { name: `T10 slowest dashboard query over 24 h, ${sizeName(LARGE)}, ms`, metric: 'dashboard_slowest_ms', comparator: '<=', limit: 200 },
  ],
  async run(ctx) {
    const store = await largeStore(ctx, LARGE);
    const c = await open(store.url);
    const rounds = QUICK ? 2 : 5;
    const metrics: Metrics = {};
    const spread: Record<string, Summary> = {};
    try {
      await reconciledSinceHistory(c);

      const report: number[] = [], json: number[] = [];
      for (let r = 0; r < rounds; r++) {
        for (const [args, out] of [[['report', '--since', '1d'], report], [['report', '--json', '--since', '1d'], json]] as const) {
          const res = await runCli(store.url, [...args]);
          if (res.code !== 0) throw new Error(`bench: ${args.join(' ')} exited ${res.code}: ${res.stderr.slice(0, 500)}`);
          out.push(res.ms);
        }
      }
      metrics.report_ms = summary(report).median;
      metrics.report_json_ms = summary(json).median;
      metrics.cli_start_ms = await cliStartMs();
      spread.report_ms = summary(report);
      spread.report_json_ms = summary(json);

      const { rows: [w] } = await c.query(`SELECT to_char(t - interval '24 hours', 'YYYY-MM-DD HH24:MI:SS') AS from,
          to_char(t, 'YYYY-MM-DD HH24:MI:SS') AS to FROM (SELECT now() AT TIME ZONE 'UTC' AS t) AS n`);
      let slowest = 0, slowestFile = '';
      for (const file of readdirSync(DIR).filter((f) => f.endsWith('.sql')).sort()) {
        const q = panelQuery(file, w.from, w.to);
        await c.query(q.text, q.values);
        const ms: number[] = [];
        for (let r = 0; r < rounds; r++) {
          const t0 = now();
          await c.query(q.text, q.values);
          ms.push(now() - t0);
        }
        const key = `dashboard_${file.replace(/\.sql$/, '').replace(/-/g, '_')}_ms`;
        metrics[key] = summary(ms).median;
        spread[key] = summary(ms);
        if (summary(ms).median > slowest) { slowest = summary(ms).median; slowestFile = file; }
      }
      metrics.dashboard_slowest_ms = slowest;
      metrics.dashboard_slowest = slowestFile;
    } finally {
      await c.end();
    }
    return { metrics, spread };
  },
};
export default kase;
