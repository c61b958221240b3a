// The dashboard queries: every file in sql/dashboards/ runs against a seeded database, and the Grafana
// dashboard runs exactly those files (its rawSql, with Grafana's macros and variables substituted as
// Grafana would, is executed too).
import { describe, it, expect } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { freshDatabase } from './helpers/database.js';
import { seedReportFixture } from './helpers/report-fixture.js';
import { sqlFile } from '../src/sql.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const DIR = join(PACKAGE_ROOT, 'sql', 'dashboards');
const SCHEMA = 'kandev app'; // a schema name that needs quoting
const db = await freshDatabase('dashboards');
await seedReportFixture(db, SCHEMA);

/** The parts of a Grafana dashboard this test reads. */
interface Dashboard {
  panels: Array<{ title: string; type: string; datasource?: { type: string }; targets?: Array<{ format: string; rawSql: string }> }>;
}
const builder: { buildDashboard(): Dashboard; grafanaSql(file: string): string } =
  await import(join(DIR, 'build-grafana-dashboard.mjs'));
const dashboard: Dashboard = JSON.parse(readFileSync(join(DIR, 'grafana-dashboard.json'), 'utf8'));
const sqlFiles = readdirSync(DIR).filter((f) => f.endsWith('.sql')).sort();

// Grafana's PostgreSQL macros for a fixed range, 2099-01-01 00:00 to 01:00 UTC.
const FROM = '2099-01-01T00:00:00Z', TO = '2099-01-01T01:00:00Z';
function substituteGrafana(sql: string, schema: string): string {
  const out = sql
    .replaceAll('${schema:raw}', schema.replaceAll('"', '""'))
    .replace(/\$__timeFilter\(([^)]+)\)/g, (_, col) => `${col} BETWEEN '${FROM}' AND '${TO}'`)
    .replace(/\$__timeGroupAlias\(([^,]+),\s*([0-9]+)h\)/g,
      (_, col, h) => `floor(extract(epoch from ${col})/${Number(h) * 3600})*${Number(h) * 3600} AS "time"`)
    .replaceAll('$__timeFrom()', `'${FROM}'`).replaceAll('$__timeTo()', `'${TO}'`);
  expect(out, 'every Grafana macro and variable is substituted').not.toMatch(/\$\{|\$__/);
  return out;
}

const targets = (): Array<{ title: string; format: string; rawSql: string }> =>
  dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, format: t.format, rawSql: t.rawSql })));

describe('sql/dashboards', () => {
  it('every query file runs and returns rows on the seeded database', async () => {
    const withoutMacros = sqlFiles.filter((f) => f !== 'observed-per-hour.sql');
    expect(withoutMacros).toEqual(['agent-status.sql', 'fanout-per-turn.sql', 'health.sql', 'metrics.sql', 'nesting.sql',
      'overview.sql', 'sessions-and-cards.sql', 'settlement.sql', 'stats.sql', 'subagents-per-session.sql',
      'usage-by-model.sql', 'usage-by-subagent-type.sql']);
    for (const file of withoutMacros) {
      const { rows } = await db.query(sqlFile(`dashboards/${file}`, SCHEMA));
      expect(rows.length, file).toBeGreaterThan(0);
    }
    // The report runs its own, windowed (--since/--until) queries in sql/report/ (docs/decisions.md).
  });

  it('fan-out per turn and health have the hand-counted values', async () => {
    const fanout = await db.query(sqlFile('dashboards/fanout-per-turn.sql', SCHEMA));
    expect(fanout.rows).toEqual([{ fanout: 1n, turns: 2n }, { fanout: 2n, turns: 1n }, { fanout: 4n, turns: 1n }]);
    const health = await db.query(sqlFile('dashboards/health.sql', SCHEMA));
    expect(health.rows[0]).toMatchObject({ activated: true, shortfall: 0n, excess: 0n, trigger_enabled: true, failures: 0n, collisions: 0n });
  });

  it('the metrics query gives times as Unix seconds', async () => {
    const { rows } = await db.query(sqlFile('dashboards/metrics.sql', SCHEMA));
    expect(rows[0]).toMatchObject({ activated: true, trigger_installed: true, trigger_enabled: true, shortfall: 0n,
      last_observed_seconds: Date.UTC(2099, 0, 1, 0, 0, 9) / 1000, attempted: 12n, persisted: 12n });
  });
});

describe('Grafana dashboard (sql/dashboards/grafana-dashboard.json)', () => {
  it('is what build-grafana-dashboard.mjs builds from the .sql files (rebuild it after editing a query)', () => {
    expect(dashboard).toEqual(JSON.parse(JSON.stringify(builder.buildDashboard())));
  });

  it('every panel query is one of the files, and every file but metrics.sql has a panel', () => {
    const byFile = new Map(sqlFiles.map((f) => [builder.grafanaSql(f), f]));
    const used = new Set<string>();
    for (const t of targets()) {
      const file = byFile.get(t.rawSql);
      expect(file, `panel "${t.title}" runs a query from sql/dashboards`).toBeDefined();
      used.add(file!);
    }
    expect([...used].sort()).toEqual(sqlFiles.filter((f) => f !== 'metrics.sql'));
    expect(dashboard.panels.every((p) => p.type === 'row' || p.datasource?.type === 'grafana-postgresql-datasource')).toBe(true);
  });

  it('every panel query runs with the macros substituted; the hourly series counts the live subagents', async () => {
    for (const t of targets()) {
      const { rows } = await db.query(substituteGrafana(t.rawSql, SCHEMA));
      expect(rows.length, t.title).toBeGreaterThan(0);
      if (t.format === 'time_series') {
        expect(rows).toEqual([{ time: String(Date.UTC(2099, 0, 1) / 1000), metric: 'live', subagents: 7n }]);
      }
    }
  });
});
