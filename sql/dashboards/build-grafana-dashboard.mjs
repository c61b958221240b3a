// Writes grafana-dashboard.json from the .sql files beside it, so each panel runs exactly the query in
// its file (the test suite checks that they agree). Run: node sql/dashboards/build-grafana-dashboard.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const dir = new URL('./', import.meta.url);
/**
 * The data source is the dashboard's `datasource` variable (its picker at the top), with no import input
 * beside it: an input of the same name would be replaced at import and leave the picker doing nothing.
 */
const DS = { type: 'grafana-postgresql-datasource', uid: '${datasource}' };
/**
 * The Grafana releases this dashboard is written for (docs/dashboards.md says the same; the test checks
 * the JSON against it): the classic dashboard JSON at schemaVersion 39, the PostgreSQL data source under
 * its plugin id grafana-postgresql-datasource (Grafana 10.2.3 renamed it from `postgres`), and only core
 * panel types. Newer Grafana migrates an older schemaVersion on import. The test suite checks the JSON
 * against the dashboard model's types of `schemaPackage` (the npm package Grafana publishes them in).
 */
export const GRAFANA = { versions: '10.4 and later', schemaVersion: 39, schemaPackage: '@grafana/schema 10.4.19',
  panelTypes: ['row', 'stat', 'table', 'barchart', 'timeseries'] };

/** Grafana's built-in data source that hands a panel another panel's query result (no second query). */
const DASHBOARD_DS = { type: 'datasource', uid: '-- Dashboard --' };

/**
 * A windowed query file takes its time range as $1 (start, inclusive) and $2 (end, exclusive), UTC
 * timestamps where NULL leaves that side open: `report` binds --since/--until there, the dashboard binds
 * its time picker's range. Each file says which time column the range applies to (subagents by
 * observed_at, sessions by started_at). health.sql and stats.sql read the current state, which has no
 * time; observed-per-hour.sql is Grafana's own and uses its macros directly.
 */
export const TIME_RANGE = { '$1::timestamp': '$__timeFrom()::timestamp', '$2::timestamp': '$__timeTo()::timestamp' };

/** A query with the dashboard's time range in place of $1/$2; any other parameter stops the build. @param {string} sql */
export function withTimeRange(sql) {
  let out = sql;
  for (const [param, macro] of Object.entries(TIME_RANGE)) out = out.replaceAll(param, macro);
  const left = out.match(/\$\d+/);
  if (left) throw new Error(`withTimeRange: parameter ${left[0]} has no dashboard value (only $1::timestamp and $2::timestamp do)`);
  return out;
}

/**
 * A file's query for Grafana: its leading comment dropped, the schema taken from the dashboard's `schema`,
 * a hidden constant that only an editor of the dashboard sets (not a viewer's text box, not the URL), put
 * in as a quoted identifier.
 * @param {string} file
 */
export function grafanaSql(file) {
  const text = readFileSync(new URL(file, dir), 'utf8');
  const lines = text.split('\n');
  while (lines.length && (lines[0]?.startsWith('--') || lines[0]?.trim() === '')) lines.shift();
  return lines.join('\n').trim().replaceAll('@extschema@', '"${schema:raw}"');
}

/**
 * @typedef {{ x: number, y: number, w: number, h: number }} GridPos
 * @typedef {{ color: string, value: number | null }} Step a threshold step
 */

/** The dashboard, as grafana-dashboard.json holds it. */
export function buildDashboard() {
  let id = 0;
  /** @param {string} file */
  const panelSql = (file) => withTimeRange(grafanaSql(file));
  /** @param {string} file @param {string} [format] @returns {Record<string, unknown>} */
  const target = (file, format = 'table') => ({
    refId: 'A', datasource: DS, editorMode: 'code', format, rawQuery: true, rawSql: panelSql(file),
  });
  /** @param {number} x @param {number} y @param {number} w @param {number} h @returns {GridPos} */
  const pos = (x, y, w, h) => ({ x, y, w, h });

  // Health is queried once per refresh, by the first health panel; the others read its result through
  // the Dashboard data source, each picking its own field.
  /** @type {number | undefined} */
  let healthPanelId;
  /**
   * @param {string} title @param {string} file @param {string} field @param {GridPos} gridPos
   * @param {Step[]} thresholds @param {Record<string, unknown>} [extra]
   */
  function stat(title, file, field, gridPos, thresholds, extra = {}) {
    const panelId = ++id;
    /** @type {{ datasource: object, targets: Record<string, unknown>[] }} */
    let source = { datasource: DS, targets: [target(file)] };
    if (file === 'health.sql') {
      if (healthPanelId === undefined) healthPanelId = panelId;
      else source = { datasource: DASHBOARD_DS, targets: [{ refId: 'A', datasource: DASHBOARD_DS, panelId: healthPanelId }] };
    }
    return {
      id: panelId, type: 'stat', title, gridPos, ...source,
      options: { reduceOptions: { calcs: ['lastNotNull'], fields: `/^${field}$/`, values: false }, colorMode: 'background', textMode: 'value' },
      fieldConfig: { defaults: { thresholds: { mode: 'absolute', steps: thresholds }, noValue: 'unknown', ...extra }, overrides: [] },
    };
  }
  const green = { color: 'green', value: null };
  /** @param {string} title @param {string} file @param {GridPos} gridPos @param {string} [description] */
  const table = (title, file, gridPos, description) => ({
    id: ++id, type: 'table', title, description, datasource: DS, gridPos, targets: [target(file)],
    fieldConfig: { defaults: { noValue: 'unknown' }, overrides: [] }, options: { showHeader: true },
  });
  /** @param {string} title @param {string} file @param {string} x @param {GridPos} gridPos @param {string} [description] */
  const bars = (title, file, x, gridPos, description) => ({
    id: ++id, type: 'barchart', title, description, datasource: DS, gridPos, targets: [target(file)],
    options: { xField: x, orientation: 'vertical', showValue: 'always', legend: { showLegend: false } },
    fieldConfig: { defaults: {}, overrides: [] },
  });

  const panels = [
    { id: ++id, type: 'row', title: 'Capture health', collapsed: false, gridPos: pos(0, 0, 24, 1), panels: [] },
    { ...stat('Shortfall (missed subagents)', 'health.sql', 'shortfall', pos(0, 1, 4, 4), [green, { color: 'red', value: 1 }]),
      // On the panel, where Grafana shows it as the title's tooltip (a field's description shows nowhere here).
      description: 'The only alarm. Run `subagent-context repair`. Empty before activation.' },
    stat('Excess (never alarms)', 'health.sql', 'excess', pos(4, 1, 2, 4), [{ color: 'blue', value: null }]),
    { ...stat('Not compared yet', 'health.sql', 'uncompared', pos(6, 1, 3, 4), [green, { color: 'orange', value: 1 }]),
      description: 'Subagent messages written since the last comparison that health has not compared yet (status behind): ' +
        'the background comparison catches up; `subagent-context health --full` compares them now. Counted up to a cap: the cap means at least.' },
    stat('Trigger enabled', 'health.sql', 'trigger_enabled', pos(9, 1, 4, 4), [{ color: 'red', value: null }, { color: 'green', value: 1 }],
      { mappings: [{ type: 'value', options: { true: { text: 'enabled', color: 'green' }, false: { text: 'DISABLED', color: 'red' } } }] }),
    stat('Activated', 'health.sql', 'activated', pos(13, 1, 3, 4), [{ color: 'red', value: null }, { color: 'green', value: 1 }],
      { mappings: [{ type: 'value', options: { true: { text: 'yes', color: 'green' }, false: { text: 'NO', color: 'red' } } }] }),
    stat('Last observed (UTC)', 'health.sql', 'last_observed_at', pos(16, 1, 5, 4), [{ color: 'text', value: null }],
      { noValue: 'nothing captured since activation' }),
    stat('Failures since activation', 'health.sql', 'failures', pos(21, 1, 3, 4), [green, { color: 'orange', value: 1 }]),
    table('Capture counters', 'stats.sql', pos(0, 5, 24, 3), 'Sequences since installation: not transactional, they only grow.'),
    { id: ++id, type: 'row', title: 'Fan-out', collapsed: false, gridPos: pos(0, 8, 24, 1), panels: [] },
    bars('Fan-out per turn (turns that launched N subagents)', 'fanout-per-turn.sql', 'fanout', pos(0, 9, 12, 8)),
    bars('Subagents per session', 'subagents-per-session.sql', 'subagents', pos(12, 9, 12, 8)),
    table('Per card and per session', 'sessions-and-cards.sql', pos(0, 17, 24, 3),
      '"sessions per card" is what kandev shows; each subagent is one more model context.'),
    table('Totals', 'overview.sql', pos(0, 20, 24, 3)),
    {
      id: ++id, type: 'timeseries', title: 'Subagents first observed per hour', datasource: DS, gridPos: pos(0, 23, 24, 8),
      targets: [target('observed-per-hour.sql', 'time_series')], fieldConfig: { defaults: { custom: { drawStyle: 'bars' } }, overrides: [] }, options: {},
    },
    { id: ++id, type: 'row', title: 'Usage (unknown = not reported, never 0)', collapsed: false, gridPos: pos(0, 31, 24, 1), panels: [] },
    table('By subagent_type and by model', 'usage.sql', pos(0, 32, 24, 15), 'dimension says which: one row per subagent_type, then one per model.'),
    bars('By agent status', 'agent-status.sql', 'agent_status', pos(0, 47, 12, 8)),
    table('Nesting (depth; empty = parent not captured)', 'nesting.sql', pos(12, 47, 12, 8)),
    table('Settled vs outstanding', 'settlement.sql', pos(0, 55, 24, 4),
      'A background (async) launch settles when the launch returns; its run time is known only where the agent reported duration_ms.'),
  ];

  const dashboard = {
    uid: 'subagent-context', title: 'subagent-context: capture health and fan-out', tags: ['kandev', 'subagent-context'],
    timezone: 'utc', schemaVersion: GRAFANA.schemaVersion, version: 1, editable: true, refresh: '1m',
    time: { from: 'now-7d', to: 'now' },
    templating: {
      list: [
        { name: 'datasource', label: "kandev's PostgreSQL", type: 'datasource', query: 'grafana-postgresql-datasource', hide: 0 },
        // Spliced into every query as the schema's name: fixed by whoever edits the dashboard (Settings,
        // Variables), hidden, and never read from the URL.
        { name: 'schema', label: "schema of kandev's tables", type: 'constant', query: 'public', hide: 2, skipUrlSync: true },
      ],
    },
    panels,
  };
  return dashboard;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(new URL('grafana-dashboard.json', dir), JSON.stringify(buildDashboard(), null, 2) + '\n');
}
