// The dashboard queries: every file in sql/dashboards/ runs against a seeded database, and the Grafana
// dashboard runs exactly those files, the windowed ones with the time picker's range bound where `report`
// binds --since/--until (its rawSql, with Grafana's macros and variables substituted as Grafana would, is
// executed too, and pasted into psql).
import { describe, it, expect } from 'vitest';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { seedReportFixture } from '../helpers/report-fixture.js';
import { sqlFile } from '#sql';
import { PACKAGE_ROOT } from '../../src/paths.js';

const DIR = join(PACKAGE_ROOT, 'sql', 'dashboards');
const psql = ['/usr/bin/psql', '/usr/local/bin/psql'].find(existsSync);
const SCHEMA = 'kandev app'; // a schema name that needs quoting
const db = await freshDatabase('dashboards');
await seedReportFixture(db, SCHEMA);

/** The parts of a Grafana dashboard this test reads. */
interface Target { refId: string; datasource: { type: string; uid: string }; format?: string; rawSql?: string; panelId?: number }
interface Panel {
  id: number; title: string; type: string; description?: string; datasource?: { type: string; uid: string };
  fieldConfig?: { defaults: Record<string, unknown> };
  gridPos: { x: number; y: number; w: number; h: number }; targets?: Target[]; panels?: unknown[];
}
interface Dashboard {
  schemaVersion: number; panels: Panel[];
  __inputs?: unknown;
  templating: { list: Array<{ name: string; type: string; query: string; hide: number; skipUrlSync?: boolean }> };
}
const builder: {
  buildDashboard(): Dashboard; grafanaSql(file: string): string;
  TIME_RANGE: Record<string, string>; GRAFANA: { versions: string; schemaVersion: number; panelTypes: string[] };
} = await import(join(DIR, 'build-grafana-dashboard.mjs'));
const dashboard: Dashboard = JSON.parse(readFileSync(join(DIR, 'grafana-dashboard.json'), 'utf8'));
const sqlFiles = readdirSync(DIR).filter((f) => f.endsWith('.sql')).sort();

// Grafana's PostgreSQL macros for a fixed range; by default 2099-01-01 00:00 to 01:00 UTC.
type Range = { from: string; to: string };
const HOUR: Range = { from: '2099-01-01T00:00:00Z', to: '2099-01-01T01:00:00Z' };
const EVERYTHING: Range = { from: '1900-01-01T00:00:00Z', to: '2200-01-01T00:00:00Z' };
const NOTHING: Range = { from: '1901-01-01T00:00:00Z', to: '1901-01-02T00:00:00Z' };
function substituteGrafana(sql: string, schema: string, { from, to }: Range = HOUR): string {
  const out = sql
    .replaceAll('${schema:raw}', schema.replaceAll('"', '""'))
    .replace(/\$__timeFilter\(([^)]+)\)/g, (_, col) => `${col} BETWEEN '${from}' AND '${to}'`)
    .replace(/\$__timeGroupAlias\(([^,]+),\s*([0-9]+)h\)/g,
      (_, col, h) => `floor(extract(epoch from ${col})/${Number(h) * 3600})*${Number(h) * 3600} AS "time"`)
    .replaceAll('$__timeFrom()', `'${from}'`).replaceAll('$__timeTo()', `'${to}'`);
  expect(out, 'every Grafana macro and variable is substituted').not.toMatch(/\$\{|\$__/);
  return out;
}

/** A panel query with the time range's parameters put back: what its file says. */
const withoutTimeRange = (sql: string) => Object.entries(builder.TIME_RANGE)
  .reduce((out, [param, macro]) => out.replaceAll(macro, param), sql);

const sqlTargets = (): Array<{ panel: Panel; format: string; rawSql: string }> =>
  dashboard.panels.flatMap((p) => (p.targets ?? []).filter((t) => t.rawSql !== undefined)
    .map((t) => ({ panel: p, format: t.format!, rawSql: t.rawSql! })));
const fileOf = (rawSql: string) => sqlFiles.find((f) => builder.grafanaSql(f) === withoutTimeRange(rawSql));
/** The files whose data has no time: the current state, which the time picker cannot narrow. */
const TIMELESS = ['health.sql', 'stats.sql'];
/** The query files that take a time range as $1/$2 (what `report` and the dashboard bind). */
const WINDOWED = ['agent-status.sql', 'fanout-per-turn.sql', 'nesting.sql', 'overview.sql', 'sessions-and-cards.sql',
  'settlement.sql', 'subagents-per-session.sql', 'usage.sql'];
const OPEN = [null, null]; // $1/$2 unbound: all time

describe('sql/dashboards', () => {
  it('every query file runs and returns rows on the seeded database', async () => {
    const withoutMacros = sqlFiles.filter((f) => f !== 'observed-per-hour.sql');
    expect(withoutMacros).toEqual([...WINDOWED, ...TIMELESS, 'metrics.sql'].sort());
    for (const file of withoutMacros) {
      const { rows } = await db.query(sqlFile(`dashboards/${file}`, SCHEMA), WINDOWED.includes(file) ? OPEN : []);
      expect(rows.length, file).toBeGreaterThan(0);
    }
  });

  it('each windowed file applies its range to one time column, start inclusive and end exclusive', () => {
    for (const file of WINDOWED) {
      const text = readFileSync(join(DIR, file), 'utf8');
      const uses = text.match(/\$[12]::timestamp/g) ?? [];
      const windows = [...text.matchAll(/([\w.]+) >= coalesce\(\$1::timestamp, '-infinity'\) AND \1 < coalesce\(\$2::timestamp, 'infinity'\)/g)];
      expect(windows.length, `${file} spells its window one way`).toBeGreaterThan(0);
      expect(uses, `${file}: every $1/$2 is part of such a window`).toHaveLength(2 * windows.length);
      for (const w of windows) expect(['observed_at', 'started_at'], file).toContain(w[1].replace(/^\w+\./, ''));
    }
  });

  it('fan-out per turn and health have the hand-counted values', async () => {
    const fanout = await db.query(sqlFile('dashboards/fanout-per-turn.sql', SCHEMA), OPEN);
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
    const used = new Set<string>();
    for (const t of sqlTargets()) {
      const file = fileOf(t.rawSql);
      expect(file, `panel "${t.panel.title}" runs a query from sql/dashboards`).toBeDefined();
      used.add(file!);
    }
    expect([...used].sort()).toEqual(sqlFiles.filter((f) => f !== 'metrics.sql'));
  });

  it('every panel whose data has a time takes the time picker\'s range, and no panel has a parameter left', () => {
    for (const t of sqlTargets()) {
      const file = fileOf(t.rawSql)!;
      expect(t.rawSql, `panel "${t.panel.title}" (${file})`).not.toMatch(/\$\d/);
      if (TIMELESS.includes(file)) {
        expect(t.rawSql, `${file} reads the current state`).not.toContain('$__time');
      } else if (file === 'observed-per-hour.sql') {
        expect([...t.rawSql.matchAll(/\$__timeFilter\((\w+)\)/g)].map((m) => m[1])).toEqual(['observed_at']);
      } else {
        expect(WINDOWED, file).toContain(file);
        expect(t.rawSql, `panel "${t.panel.title}" honours the time picker`).toContain('$__timeFrom()::timestamp');
        expect(t.rawSql, `panel "${t.panel.title}" honours the time picker`).toContain('$__timeTo()::timestamp');
      }
    }
  });

  it('the time picker narrows every such panel: nothing in an empty range, the whole file over all time', async () => {
    for (const t of sqlTargets()) {
      const file = fileOf(t.rawSql)!;
      const all = (await db.query(substituteGrafana(t.rawSql, SCHEMA, EVERYTHING))).rows;
      const none = (await db.query(substituteGrafana(t.rawSql, SCHEMA, NOTHING))).rows;
      if (TIMELESS.includes(file)) {
        expect(none, file).toEqual(all);
        continue;
      }
      expect(none, `${file} over a range with no data`).not.toEqual(all);
      if (t.format === 'time_series') continue; // hourly buckets: no plain form to compare with
      // Over all time the panel shows what its file shows unbounded (what `report` prints without a window).
      expect(all, file).toEqual((await db.query(sqlFile(`dashboards/${file}`, SCHEMA), OPEN)).rows);
    }
    const totals = sqlTargets().find((t) => fileOf(t.rawSql) === 'overview.sql')!;
    expect((await db.query(substituteGrafana(totals.rawSql, SCHEMA, NOTHING))).rows[0]).toMatchObject({ subagents: 0n });
    const hour = (await db.query(substituteGrafana(totals.rawSql, SCHEMA, HOUR))).rows[0];
    expect(hour).toMatchObject({ subagents: 7n, live: 7n, backfill: 0n });
  });

  it('health is queried once per refresh: one panel runs it, the others read its result', () => {
    const health = sqlTargets().filter((t) => fileOf(t.rawSql) === 'health.sql');
    expect(health, 'one health query in the whole dashboard').toHaveLength(1);
    const source = health[0].panel;
    const readers = dashboard.panels.filter((p) => p.datasource?.uid === '-- Dashboard --');
    expect(readers.map((p) => p.title)).toEqual(['Excess (never alarms)', 'Not compared yet', 'Trigger enabled', 'Activated', 'Last observed (UTC)',
      'Failures since activation']);
    for (const p of readers) {
      expect(p.datasource).toEqual({ type: 'datasource', uid: '-- Dashboard --' });
      expect(p.targets, p.title).toEqual([{ refId: 'A', datasource: { type: 'datasource', uid: '-- Dashboard --' }, panelId: source.id }]);
    }
  });

  it('has the structure the Grafana versions it targets read (schemaVersion, panel types, data sources, grid)', () => {
    expect(dashboard.schemaVersion).toBe(builder.GRAFANA.schemaVersion);
    // The data source is chosen with the dashboard's picker, one variable; no import input shadows it.
    expect(dashboard.__inputs).toBeUndefined();
    expect(dashboard.templating.list.map((v) => [v.name, v.type])).toEqual([['datasource', 'datasource'], ['schema', 'constant']]);
    expect(dashboard.templating.list[0].query).toBe('grafana-postgresql-datasource');
    // The schema is spliced into SQL: a hidden constant, never read from the URL, not a viewer's text box.
    expect(dashboard.templating.list[1]).toMatchObject({ query: 'public', hide: 2, skipUrlSync: true });
    // Descriptions on the panel, where Grafana shows them as the title's tooltip; none on a field.
    expect(dashboard.panels.find((p) => p.title.startsWith('Shortfall'))!.description).toMatch(/^The only alarm/);
    for (const p of dashboard.panels) expect(p.fieldConfig?.defaults.description, p.title).toBeUndefined();
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size, 'panel ids are unique').toBe(ids.length);
    for (const p of dashboard.panels) {
      expect(builder.GRAFANA.panelTypes, p.title).toContain(p.type);
      expect(p.gridPos.x + p.gridPos.w, `${p.title} fits the 24-column grid`).toBeLessThanOrEqual(24);
      if (p.type === 'row') { expect(p.panels).toEqual([]); continue; }
      expect([['grafana-postgresql-datasource', '${datasource}'], ['datasource', '-- Dashboard --']], p.title)
        .toContainEqual([p.datasource?.type, p.datasource?.uid]);
      for (const t of p.targets ?? []) {
        expect(t.datasource, p.title).toEqual(p.datasource);
        if (t.rawSql !== undefined) expect(t).toMatchObject({ refId: 'A', editorMode: 'code', rawQuery: true });
      }
    }
    // No two panels overlap on the grid.
    const cells = new Set<string>();
    for (const { title, gridPos: g } of dashboard.panels) {
      for (let x = g.x; x < g.x + g.w; x++) for (let y = g.y; y < g.y + g.h; y++) {
        expect(cells.has(`${x},${y}`), `${title} overlaps another panel at ${x},${y}`).toBe(false);
        cells.add(`${x},${y}`);
      }
    }
    // docs/dashboards.md states the same versions and schemaVersion.
    const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'dashboards.md'), 'utf8');
    expect(doc).toContain(`Grafana ${builder.GRAFANA.versions}`);
    expect(doc).toContain(`schemaVersion ${builder.GRAFANA.schemaVersion}`);
  });

  it('the hourly series counts the live subagents of its hour', async () => {
    const series = sqlTargets().filter((t) => t.format === 'time_series');
    expect(series.map((t) => fileOf(t.rawSql))).toEqual(['observed-per-hour.sql']);
    const { rows } = await db.query(substituteGrafana(series[0].rawSql, SCHEMA));
    expect(rows).toEqual([{ time: String(Date.UTC(2099, 0, 1) / 1000), metric: 'live', subagents: 7n }]);
  });

  it.skipIf(!psql)('every panel query, macros substituted, pastes into psql as it is', async () => {
    const script = sqlTargets().map((t) => substituteGrafana(t.rawSql, SCHEMA, EVERYTHING)).join('\n');
    const r = await new Promise<{ code: number; out: string }>((resolve) => {
      const child = execFile(psql!, ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', db.url, '-f', '-'], (err, stdout, stderr) =>
        resolve({ code: err ? 1 : 0, out: stdout + stderr }));
      child.stdin!.end(script);
    });
    expect(r.code, r.out).toBe(0);
    expect(r.out).not.toMatch(/ERROR/);
    expect(r.out.match(/^\(\d+ rows?\)$/gm), 'one result per panel query').toHaveLength(sqlTargets().length);
  });
});
