// The fan-out report: runs the queries in sql/dashboards/ (the same ones the dashboards use) and renders
// them as terminal tables and charts, JSON, or one self-contained HTML page. No SQL lives here.
import type pg from 'pg';
import { quoteIdent, sqlFile } from './sql.js';

/** The report's panels, each one file in sql/dashboards/. */
export const REPORT_QUERIES = {
  overview: 'overview.sql',
  fanout_per_turn: 'fanout-per-turn.sql',
  sessions_and_cards: 'sessions-and-cards.sql',
  subagents_per_session: 'subagents-per-session.sql',
  by_subagent_type: 'usage-by-subagent-type.sql',
  by_model: 'usage-by-model.sql',
  agent_status: 'agent-status.sql',
  nesting: 'nesting.sql',
  settlement: 'settlement.sql',
  health: 'health.sql',
  stats: 'stats.sql',
} as const;

type Num = number | null;

export interface UsageRow {
  subagents: number; async: number; usage_reported: number; usage_not_reported: number;
  total_tokens: Num; avg_tokens: Num; max_tokens: Num; avg_duration_ms: Num; max_duration_ms: Num; avg_tool_uses: Num;
}

export interface Report {
  schema: string;
  overview: {
    subagents: number; live: number; backfill: number; sessions: number; turns: number;
    usage_reported: number; usage_not_reported: number; subagent_type_missing: number;
    total_tokens: Num; max_tokens: Num; unknown_execution: number;
  };
  fanout_per_turn: Array<{ fanout: number; turns: number }>;
  sessions_and_cards: {
    cards: number; sessions: number; subagents: number; sessions_with_subagents: number;
    sessions_per_card: Num; subagents_per_session: Num; subagents_per_card: Num; contexts_per_card: Num;
    most_subagents_in_one_session: number;
  };
  subagents_per_session: Array<{ subagents: number; sessions: number }>;
  by_subagent_type: Array<UsageRow & { subagent_type: string }>;
  by_model: Array<UsageRow & { model: string }>;
  agent_status: Array<{ agent_status: string; subagents: number; usage_reported: number; model_reported: number }>;
  /** null where the topology cannot answer it (`unavailable` says why). */
  nesting: Array<{ depth: number | null; subagents: number }> | null;
  /** Panels left out on this topology, each with the one sentence that says why (SPEC §12). */
  unavailable: Record<string, string>;
  settlement: { settled: number; outstanding: number; outstanding_async: number; oldest_outstanding_since: string | null; median_seconds_to_settle: Num };
  health: {
    activated: boolean; capture_since: string | null; backfill_through: string | null; shortfall: Num; excess: Num;
    last_observed_at: string | null; trigger_enabled: boolean; failures: Num; collisions: number; status: string; installed_version: string | null;
  };
  stats: { attempted: number; skipped_no_identity: number; persisted: number; failed: number; anomalous_value: number; unknown_execution: number };
}

// int2, int4, int8, float4, float8, numeric: numbers in the report (counts fit a double exactly).
const NUMERIC_TYPES = new Set([20, 21, 23, 700, 701, 1700]);

function plain(result: pg.QueryResult): Record<string, unknown>[] {
  const numeric = result.fields.filter((f) => NUMERIC_TYPES.has(f.dataTypeID)).map((f) => f.name);
  return result.rows.map((row) => {
    const out: Record<string, unknown> = { ...row };
    for (const name of numeric) out[name] = row[name] === null ? null : Number(row[name]);
    return out;
  });
}

/** Runs every report query in one read-only snapshot, so the panels agree with each other. */
export async function readReport(client: pg.ClientBase, schema: string): Promise<Report> {
  const out: Record<string, unknown> = { schema };
  const unavailable: Record<string, string> = {};
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    const known = await client.query(
      `SELECT to_regprocedure(format('%I.subagent_context_topology()', $1::text)) IS NOT NULL AS known`, [schema]);
    const topology = known.rows[0].known
      ? (await client.query(`SELECT ${quoteIdent(schema)}.subagent_context_topology() AS t`)).rows[0].t : 'plain';
    if (topology === 'citus') {
      unavailable.nesting = 'Nesting is not available on Citus: it follows parent links with a recursive query, ' +
        'which Citus runs over distributed tables only within one session.';
    }
    for (const [key, file] of Object.entries(REPORT_QUERIES)) {
      if (unavailable[key]) { out[key] = null; continue; }
      const rows = plain(await client.query(sqlFile(`dashboards/${file}`, schema)));
      const single = ['overview', 'sessions_and_cards', 'settlement', 'health', 'stats'].includes(key);
      out[key] = single ? rows[0] : rows;
    }
  } finally {
    await client.query('ROLLBACK').catch(() => {});
  }
  out.unavailable = unavailable;
  return out as unknown as Report;
}

// ---------------------------------------------------------------------------------------------------
// Formatting shared by the terminal and HTML renderers. NULL is "unknown" (not reported), never 0.

export const UNKNOWN = 'unknown';

export function fmtInt(v: Num): string {
  if (v === null || v === undefined) return UNKNOWN;
  return Math.round(v).toLocaleString('en-US');
}

export function fmtDec(v: Num, digits = 2): string {
  if (v === null || v === undefined) return UNKNOWN;
  return v.toFixed(digits);
}

export function fmtDuration(ms: Num): string {
  if (ms === null || ms === undefined) return UNKNOWN;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m}m ${String(Math.round(s - m * 60)).padStart(2, '0')}s`;
}

const usageColumns: Array<[string, (r: UsageRow) => string]> = [
  ['subagents', (r) => fmtInt(r.subagents)],
  ['async', (r) => fmtInt(r.async)],
  ['usage reported', (r) => fmtInt(r.usage_reported)],
  ['not reported', (r) => fmtInt(r.usage_not_reported)],
  ['tokens (sum)', (r) => fmtInt(r.total_tokens)],
  ['tokens (avg)', (r) => fmtInt(r.avg_tokens)],
  ['tokens (max)', (r) => fmtInt(r.max_tokens)],
  ['duration (avg)', (r) => fmtDuration(r.avg_duration_ms)],
  ['duration (max)', (r) => fmtDuration(r.max_duration_ms)],
  ['tool uses (avg)', (r) => fmtDec(r.avg_tool_uses, 1)],
];

export function depthLabel(depth: number | null): string {
  if (depth === null) return 'parent not captured';
  if (depth === 0) return 'launched by the agent';
  return `nested, depth ${depth}`;
}

// ---------------------------------------------------------------------------------------------------
// Terminal

export interface Style { bold(s: string): string; dim(s: string): string; bar(s: string): string }
const noStyle: Style = { bold: (s) => s, dim: (s) => s, bar: (s) => s };

/** A text table; the first column left-aligned, the others right-aligned. */
export function table(header: string[], rows: string[][], style: Style = noStyle): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => '  ' + cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [style.bold(line(header)), style.dim('  ' + widths.map((w) => '─'.repeat(w)).join('  ')), ...rows.map(line)].join('\n');
}

/** A horizontal bar chart: one row per label, bars scaled to the largest value. */
export function barChart(rows: Array<[string, number]>, style: Style = noStyle, width = 40): string {
  if (rows.length === 0) return style.dim('  (no data)');
  const max = Math.max(...rows.map(([, v]) => v), 1);
  const lw = Math.max(...rows.map(([l]) => l.length));
  return rows.map(([label, v]) => {
    const n = v === 0 ? 0 : Math.max(1, Math.round((v / max) * width));
    return `  ${label.padStart(lw)} │${style.bar('█'.repeat(n))} ${fmtInt(v)}`;
  }).join('\n');
}

export function renderText(r: Report, style: Style = noStyle): string {
  const o = r.overview;
  const sc = r.sessions_and_cards;
  const out: string[] = [];
  const section = (title: string) => out.push('', style.bold(title));
  out.push(style.bold(`subagent-context report (schema ${r.schema})`));
  out.push(`  ${fmtInt(o.subagents)} subagents (${fmtInt(o.live)} live, ${fmtInt(o.backfill)} backfilled) in ${fmtInt(o.turns)} turns of ${fmtInt(o.sessions)} sessions; ` +
    `usage reported by ${fmtInt(o.usage_reported)}, not reported by ${fmtInt(o.usage_not_reported)}; ` +
    `${fmtInt(o.total_tokens)} tokens reported, largest ${fmtInt(o.max_tokens)}`);

  section('Fan-out per turn (turns that launched N subagents)');
  out.push(barChart(r.fanout_per_turn.map((f) => [`${f.fanout} subagent${f.fanout === 1 ? '' : 's'}`, f.turns]), style));

  section('Per card (task) and per session');
  out.push(table(['', 'value'], [
    ['cards (tasks with a session)', fmtInt(sc.cards)],
    ['sessions', fmtInt(sc.sessions)],
    ['sessions per card   (what kandev shows)', fmtDec(sc.sessions_per_card)],
    ['subagents per card', fmtDec(sc.subagents_per_card)],
    ['subagents per session', fmtDec(sc.subagents_per_session)],
    ['model contexts per card (sessions + subagents)', fmtDec(sc.contexts_per_card)],
    ['sessions with subagents', fmtInt(sc.sessions_with_subagents)],
    ['most subagents in one session', fmtInt(sc.most_subagents_in_one_session)],
  ], style));

  section('Subagents per session (sessions that launched N)');
  out.push(barChart(r.subagents_per_session.map((s) => [String(s.subagents), s.sessions]), style));

  section('By subagent_type');
  out.push(table(['subagent_type', ...usageColumns.map(([h]) => h)],
    r.by_subagent_type.map((row) => [row.subagent_type, ...usageColumns.map(([, f]) => f(row))]), style));

  section('By model');
  out.push(table(['model', ...usageColumns.map(([h]) => h)],
    r.by_model.map((row) => [row.model, ...usageColumns.map(([, f]) => f(row))]), style));
  out.push(style.dim(`  ${UNKNOWN} = not reported by the agent (async launches never report usage); it is not 0.`));

  section('By agent status (as the agent reported it)');
  out.push(table(['agent_status', 'subagents', 'usage reported', 'model reported'],
    r.agent_status.map((s) => [s.agent_status, fmtInt(s.subagents), fmtInt(s.usage_reported), fmtInt(s.model_reported)]), style));

  section('Nesting');
  if (r.nesting === null) out.push(`  ${r.unavailable.nesting}`);
  else out.push(table(['', 'subagents'], r.nesting.map((n) => [depthLabel(n.depth), fmtInt(n.subagents)]), style));

  section('Settled vs outstanding');
  const st = r.settlement;
  out.push(table(['', 'subagents'], [
    ['settled (launching call finished)', fmtInt(st.settled)],
    ['outstanding', fmtInt(st.outstanding)],
    ['outstanding async', fmtInt(st.outstanding_async)],
  ], style));
  out.push(`  median time to settle ${st.median_seconds_to_settle === null ? UNKNOWN : `${fmtDec(st.median_seconds_to_settle, 1)} s`}` +
    (st.oldest_outstanding_since ? `; oldest outstanding since ${st.oldest_outstanding_since}` : ''));
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------------
// HTML: one page, inline CSS and SVG, no script, nothing fetched.

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]!));
}

/** A vertical bar chart as inline SVG; every bar carries its label and value as data attributes. */
export function svgBarChart(id: string, title: string, bars: Array<{ label: string; value: number }>): string {
  const W = 560, H = 220, left = 40, bottom = 40, top = 20;
  const max = Math.max(1, ...bars.map((b) => b.value));
  const slot = bars.length ? (W - left - 10) / bars.length : 0;
  const bw = Math.max(4, Math.min(60, slot * 0.7));
  const body = bars.map((b, i) => {
    const h = Math.round(((H - bottom - top) * b.value) / max);
    const x = left + i * slot + (slot - bw) / 2;
    const y = H - bottom - h;
    const label = escapeHtml(b.label);
    return `<g class="bar" data-label="${label}" data-value="${b.value}">` +
      `<rect x="${x.toFixed(1)}" y="${y}" width="${bw.toFixed(1)}" height="${h}" fill="#4c78a8"><title>${label}: ${b.value}</title></rect>` +
      `<text class="value" x="${(x + bw / 2).toFixed(1)}" y="${y - 4}" text-anchor="middle">${fmtInt(b.value)}</text>` +
      `<text class="label" x="${(x + bw / 2).toFixed(1)}" y="${H - bottom + 16}" text-anchor="middle">${label}</text></g>`;
  }).join('');
  return `<figure><figcaption>${escapeHtml(title)}</figcaption>` +
    `<svg id="${id}" class="chart" role="img" aria-label="${escapeHtml(title)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">` +
    `<line x1="${left}" y1="${H - bottom}" x2="${W - 10}" y2="${H - bottom}" stroke="#888"/>${body}</svg></figure>`;
}

/** Horizontal stacked bars: usage reported vs not reported per group. */
export function svgUsageChart(id: string, title: string, rows: Array<{ label: string; reported: number; notReported: number }>): string {
  const W = 560, rowH = 26, left = 170, top = 10;
  const H = top + rows.length * rowH + 30;
  const max = Math.max(1, ...rows.map((r) => r.reported + r.notReported));
  const scale = (W - left - 60) / max;
  const body = rows.map((r, i) => {
    const y = top + i * rowH;
    const w1 = Math.round(r.reported * scale), w2 = Math.round(r.notReported * scale);
    const label = escapeHtml(r.label);
    return `<g class="usage" data-label="${label}" data-reported="${r.reported}" data-not-reported="${r.notReported}">` +
      `<text x="${left - 6}" y="${y + 16}" text-anchor="end">${label}</text>` +
      `<rect class="reported" x="${left}" y="${y + 4}" width="${w1}" height="16" fill="#54a24b"><title>usage reported: ${r.reported}</title></rect>` +
      `<rect class="not-reported" x="${left + w1}" y="${y + 4}" width="${w2}" height="16" fill="#bab0ac"><title>usage not reported: ${r.notReported}</title></rect>` +
      `<text x="${left + w1 + w2 + 6}" y="${y + 16}">${r.reported} / ${r.reported + r.notReported}</text></g>`;
  }).join('');
  const legendY = top + rows.length * rowH + 18;
  return `<figure><figcaption>${escapeHtml(title)}</figcaption>` +
    `<svg id="${id}" class="chart" role="img" aria-label="${escapeHtml(title)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">${body}` +
    `<rect x="${left}" y="${legendY - 10}" width="12" height="12" fill="#54a24b"/><text x="${left + 16}" y="${legendY}">usage reported</text>` +
    `<rect x="${left + 130}" y="${legendY - 10}" width="12" height="12" fill="#bab0ac"/><text x="${left + 146}" y="${legendY}">not reported (unknown, not 0)</text>` +
    `</svg></figure>`;
}

function htmlTable(id: string, header: string[], rows: string[][]): string {
  return `<table id="${id}"><thead><tr>${header.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>` +
    rows.map((r) => `<tr>${r.map((c, i) => {
      const cls = [i === 0 ? '' : 'num', c === UNKNOWN ? 'unknown' : ''].filter(Boolean).join(' ');
      return `<td${cls ? ` class="${cls}"` : ''}>${escapeHtml(c)}</td>`;
    }).join('')}</tr>`).join('') +
    `</tbody></table>`;
}

export function renderHtml(r: Report, generatedAt = new Date().toISOString()): string {
  const o = r.overview;
  const sc = r.sessions_and_cards;
  const st = r.settlement;
  const h = r.health;
  const kv = (id: string, rows: Array<[string, string]>) =>
    `<table id="${id}" class="kv"><tbody>${rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td class="num" data-key="${escapeHtml(k)}">${escapeHtml(v)}</td></tr>`).join('')}</tbody></table>`;
  const usage = (rows: Array<UsageRow & { label: string }>) => rows.map((x) => [x.label, ...usageColumns.map(([, f]) => f(x))]);
  const healthWord = h.status;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>subagent-context report: ${escapeHtml(r.schema)}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.unknown{color:#999;font-style:italic}
.kv th{font-weight:normal;color:#555}figure{margin:1em 0}figcaption{font-weight:600;margin-bottom:.3em}
svg text{font:11px system-ui,sans-serif;fill:#333}.note{color:#666}.status{font-weight:600}
</style></head><body>
<h1>subagent-context report <small>(schema ${escapeHtml(r.schema)})</small></h1>
<p class="note">Generated ${escapeHtml(generatedAt)}. Health: <span id="health-status" class="status">${escapeHtml(healthWord)}</span>
 (shortfall ${escapeHtml(fmtInt(h.shortfall))}, excess ${escapeHtml(fmtInt(h.excess))}). "unknown" means the agent did not report the value; it is never 0.</p>
<h2>Overview</h2>
${kv('overview', [
  ['subagents', fmtInt(o.subagents)], ['live', fmtInt(o.live)], ['backfilled', fmtInt(o.backfill)],
  ['turns with subagents', fmtInt(o.turns)], ['sessions with subagents', fmtInt(o.sessions)],
  ['usage reported', fmtInt(o.usage_reported)], ['usage not reported', fmtInt(o.usage_not_reported)],
  ['tokens reported (sum)', fmtInt(o.total_tokens)], ['largest total_tokens', fmtInt(o.max_tokens)],
  ['subagent_type missing', fmtInt(o.subagent_type_missing)]])}
<h2>Fan-out per turn</h2>
${svgBarChart('chart-fanout', 'Turns that launched N subagents', r.fanout_per_turn.map((f) => ({ label: String(f.fanout), value: f.turns })))}
<h2>Per card and per session</h2>
${kv('cards', [
  ['cards (tasks with a session)', fmtInt(sc.cards)], ['sessions', fmtInt(sc.sessions)],
  ['sessions per card (what kandev shows)', fmtDec(sc.sessions_per_card)],
  ['subagents per card', fmtDec(sc.subagents_per_card)], ['subagents per session', fmtDec(sc.subagents_per_session)],
  ['model contexts per card', fmtDec(sc.contexts_per_card)], ['most subagents in one session', fmtInt(sc.most_subagents_in_one_session)]])}
${svgBarChart('chart-per-session', 'Sessions that launched N subagents', r.subagents_per_session.map((s) => ({ label: String(s.subagents), value: s.sessions })))}
<h2>By subagent_type</h2>
${svgUsageChart('chart-usage-by-type', 'Usage reported vs not reported, per subagent_type', r.by_subagent_type.map((x) => ({ label: x.subagent_type, reported: x.usage_reported, notReported: x.usage_not_reported })))}
${htmlTable('by-subagent-type', ['subagent_type', ...usageColumns.map(([c]) => c)], usage(r.by_subagent_type.map((x) => ({ ...x, label: x.subagent_type }))))}
<h2>By model</h2>
${htmlTable('by-model', ['model', ...usageColumns.map(([c]) => c)], usage(r.by_model.map((x) => ({ ...x, label: x.model }))))}
<h2>By agent status</h2>
${svgBarChart('chart-agent-status', 'Subagents per agent-reported status', r.agent_status.map((s) => ({ label: s.agent_status, value: s.subagents })))}
<h2>Nesting</h2>
${r.nesting === null ? `<p id="nesting">${escapeHtml(r.unavailable.nesting)}</p>`
  : htmlTable('nesting', ['', 'subagents'], r.nesting.map((n) => [depthLabel(n.depth), fmtInt(n.subagents)]))}
<h2>Settled vs outstanding</h2>
${kv('settlement', [
  ['settled', fmtInt(st.settled)], ['outstanding', fmtInt(st.outstanding)], ['outstanding async', fmtInt(st.outstanding_async)],
  ['median seconds to settle', st.median_seconds_to_settle === null ? UNKNOWN : fmtDec(st.median_seconds_to_settle, 1)],
  ['oldest outstanding since', st.oldest_outstanding_since ?? '-']])}
</body></html>
`;
}
