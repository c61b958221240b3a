// The fan-out report: runs the queries in sql/dashboards/ and sql/report/ (one file per panel, readable on
// their own) in one snapshot, and renders them as terminal tables and charts, JSON, or one self-contained
// HTML page. No SQL lives here; what is here is formatting.
import type pg from 'pg';
import { quoteIdent, sqlFile } from '#sql';
import { UserError } from './db.js';
import { safe } from './output.js';
import { statusFacts } from './status.js';
import { utcTimestamp } from './timestamp.js';

/**
 * The windowed panels, each one file taking $1 (since) and $2 (until): those Grafana also shows live in
 * sql/dashboards/ (its builder puts the time picker's range in $1/$2), the report's own in sql/report/.
 */
const WINDOWED = {
  identity: 'report/identity.sql',
  overview: 'dashboards/overview.sql',
  fanout_per_turn: 'dashboards/fanout-per-turn.sql',
  sessions_and_cards: 'dashboards/sessions-and-cards.sql',
  subagents_per_session: 'dashboards/subagents-per-session.sql',
  usage: 'dashboards/usage.sql',
  agent_status: 'dashboards/agent-status.sql',
  nesting: 'dashboards/nesting.sql',
  settlement: 'dashboards/settlement.sql',
  running: 'report/running.sql',
  top: 'report/top.sql',
  trend_per_day: 'report/trend-per-day.sql',
} as const;
const SINGLE_ROW = new Set(['identity', 'overview', 'sessions_and_cards', 'settlement', 'health', 'stats']);

type Num = number | null;

export interface UsageRow {
  subagents: number; async: number; usage_reported: number; usage_not_reported: number;
  total_tokens: Num; avg_tokens: Num; max_tokens: Num; avg_duration_ms: Num; max_duration_ms: Num; avg_tool_uses: Num;
}

export interface TopRow {
  id: string; task_id: string; title: string | null; sessions?: number;
  subagents: number; async: number; turns: number; total_tokens: Num; usage_not_reported: number;
}

/** The time window (UTC, as the table stores times): since inclusive, until exclusive, null = open. */
export interface ReportWindow { since: string | null; until: string | null }

export interface Report {
  schema: string;
  database: { host: string; database: string; schema: string; server_port: number | null };
  /** The window asked for and what it covers: the first and last subagent observed in it. */
  window: { since: string | null; until: string | null; first_observed: string | null; last_observed: string | null; as_of: string };
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
  /** Panels left out on this topology or host, each with the one sentence that says why (docs/decisions.md, Citus and partitioned messages). */
  unavailable: Record<string, string>;
  settlement: {
    settled: number; settled_sync: number; settled_async: number; outstanding: number; outstanding_async: number;
    oldest_outstanding_since: string | null; median_seconds_to_settle_sync: Num; median_reported_run_seconds: Num; run_time_reported: number;
  };
  /** Calls not settled yet, oldest first (at most 20; settlement.outstanding counts them all). */
  running: Array<{ task_id: string; title: string | null; task_session_id: string; tool_call_id: string; subagent_type: string | null;
    model: string | null; agent_status: string | null; tool_status: string | null; async: boolean; observed_at: string; age_seconds: number }>;
  top_cards: { by_subagents: TopRow[]; by_tokens: TopRow[] };
  top_sessions: { by_subagents: TopRow[]; by_tokens: TopRow[] };
  trend_per_day: Array<{ day: string; subagents: number; async: number; sessions: number; total_tokens: Num }>;
  health: {
    activated: boolean; capture_since: string | null; backfill_through: string | null; shortfall: Num; excess: Num;
    last_observed_at: string | null; trigger_enabled: boolean; failures: Num; collisions: number; status: string; installed_version: string | null;
  };
  stats: { attempted: number; skipped_no_identity: number; persisted: number; failed: number; anomalous_value: number; unknown_execution: number };
}

// ---------------------------------------------------------------------------------------------------
// --since / --until

const UNITS: Record<string, number> = { m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * One --since/--until value as a UTC timestamp for SQL ('YYYY-MM-DD HH:MM:SS.mmm'). A date alone is
 * UTC midnight; as --until it means the end of that day (the whole day is included). A time ago is
 * 30m, 12h, 7d or 2w.
 */
export function parseWhen(flag: 'since' | 'until', value: string, now = new Date()): string {
  const v = value.trim();
  let t: number = NaN;
  const ago = /^(\d{1,6})\s*(m|min|h|d|w)$/.exec(v);
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(v);
  const stamp = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$/i.exec(v);
  if (ago) t = now.getTime() - Number(ago[1]) * UNITS[ago[2]];
  else if (v === 'now') t = now.getTime();
  else if (date || stamp) {
    const [, y, mo, d] = (date ?? stamp)!;
    const day = Date.UTC(Number(y), Number(mo) - 1, Number(d));
    const real = new Date(day);
    // Date.UTC rolls 2026-02-30 over to March: refuse it instead.
    if (real.getUTCFullYear() === Number(y) && real.getUTCMonth() === Number(mo) - 1 && real.getUTCDate() === Number(d)) {
      if (date) t = flag === 'until' ? day + UNITS.d : day;
      else if (Number(stamp![4]) < 24 && Number(stamp![5]) < 60 && Number(stamp![6] ?? 0) < 60) {
        t = Date.parse(v.replace(' ', 'T') + (stamp![7] ? '' : 'Z'));
      }
    }
  }
  if (!Number.isFinite(t)) {
    throw new UserError(`--${flag} must be a date (2026-08-01), a date and time in UTC (2026-08-01T09:30, or with Z or ` +
      `an offset like +02:00) or a time ago like 30m, 12h, 7d or 2w; got "${safe(value)}".`);
  }
  return utcTimestamp(t);
}

export function parseWindow(since: string | undefined, until: string | undefined, now = new Date()): ReportWindow {
  const w = { since: since === undefined ? null : parseWhen('since', since, now), until: until === undefined ? null : parseWhen('until', until, now) };
  if (w.since && w.until && w.since >= w.until) {
    throw new UserError(`--since (${w.since} UTC) must be before --until (${w.until} UTC): nothing lies between them.`);
  }
  return w;
}

// ---------------------------------------------------------------------------------------------------
// Reading

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

export interface ReadOptions {
  window?: ReportWindow;
  /** The host as the operator named it (the connection URL's); else the server's address. */
  host?: string;
}

/** Runs every report query in one read-only snapshot, so the panels agree with each other. */
export async function readReport(client: pg.ClientBase, schema: string, opts: ReadOptions = {}): Promise<Report> {
  const window = opts.window ?? { since: null, until: null };
  const raw: Record<string, unknown> = {};
  const unavailable: Record<string, string> = {};
  const q = async (file: string, params: unknown[] = []) => plain(await client.query(sqlFile(file, schema), params));
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    const known = await client.query(
      `SELECT to_regprocedure(format('%I.subagent_context_topology()', $1::text)) IS NOT NULL AS known,
              EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                       WHERE attrelid = to_regclass(format('%I.tasks', $1::text)) AND attname = 'title' AND NOT attisdropped) AS titles`, [schema]);
    const topology = known.rows[0].known
      ? (await client.query(`SELECT ${quoteIdent(schema)}.subagent_context_topology() AS t`)).rows[0].t : 'plain';
    if (topology === 'citus') {
      unavailable.nesting = 'Nesting is not available on Citus: it follows parent links with a recursive query, ' +
        'which Citus runs over distributed tables only within one session.';
    }
    for (const [key, file] of Object.entries(WINDOWED)) {
      if (unavailable[key]) { raw[key] = null; continue; }
      const rows = await q(file, [window.since, window.until]);
      raw[key] = SINGLE_ROW.has(key) ? rows[0] : rows;
    }
    // Current state, not windowed: the same files the dashboards and `metrics` run.
    raw.health = (await q('dashboards/health.sql'))[0];
    raw.stats = (await q('dashboards/stats.sql'))[0];
    const ids = [...new Set([...(raw.top as TopRow[]), ...(raw.running as TopRow[])].map((x) => x.task_id))];
    const titles = new Map<string, string>();
    if (known.rows[0].titles) for (const t of await q('report/task-titles.sql', [ids])) titles.set(t.id as string, t.title as string);
    else unavailable.titles = `the host has no ${quoteIdent(schema)}.tasks.title column, so cards are shown by their id.`;
    for (const key of ['top', 'running']) {
      for (const row of raw[key] as Array<Record<string, unknown>>) row.title = titles.get(row.task_id as string) ?? null;
    }
  } finally {
    await client.query('ROLLBACK').catch(() => {});
  }
  return assemble(schema, raw, unavailable, opts.host);
}

function assemble(schema: string, raw: Record<string, unknown>, unavailable: Record<string, string>, host?: string): Report {
  const id = raw.identity as Record<string, string | number | null>;
  const usage = raw.usage as Array<UsageRow & { dimension: string; label: string }>;
  const pick = (dimension: string, name: 'subagent_type' | 'model') => usage.filter((u) => u.dimension === dimension)
    .map(({ dimension: _d, label, ...rest }) => ({ [name]: label, ...rest }));
  type Ranked = TopRow & { level: 'card' | 'session'; rank_by_subagents: number; rank_by_tokens: number | null };
  const top = (level: Ranked['level']) => {
    const rows = (raw.top as Ranked[]).filter((r) => r.level === level);
    const shape = ({ level: _l, rank_by_subagents: _a, rank_by_tokens: _b, ...r }: Ranked): TopRow => {
      if (level === 'session') delete r.sessions;  // a card's count of sessions; a session has none
      return r;
    };
    return {
      by_subagents: rows.filter((r) => r.rank_by_subagents <= 10).sort((a, b) => a.rank_by_subagents - b.rank_by_subagents).map(shape),
      by_tokens: rows.filter((r) => r.rank_by_tokens !== null && r.rank_by_tokens <= 10).sort((a, b) => a.rank_by_tokens! - b.rank_by_tokens!).map(shape),
    };
  };
  return {
    schema,
    database: { host: host || (id.server_address as string | null) || 'local socket', database: id.database as string, schema,
      server_port: id.server_port as number | null },
    window: { since: id.since as string | null, until: id.until as string | null, first_observed: id.first_observed as string | null,
      last_observed: id.last_observed as string | null, as_of: id.as_of as string },
    overview: raw.overview as Report['overview'],
    fanout_per_turn: raw.fanout_per_turn as Report['fanout_per_turn'],
    sessions_and_cards: raw.sessions_and_cards as Report['sessions_and_cards'],
    subagents_per_session: raw.subagents_per_session as Report['subagents_per_session'],
    by_subagent_type: pick('subagent_type', 'subagent_type') as Report['by_subagent_type'],
    by_model: pick('model', 'model') as Report['by_model'],
    agent_status: raw.agent_status as Report['agent_status'],
    nesting: raw.nesting as Report['nesting'],
    unavailable,
    settlement: raw.settlement as Report['settlement'],
    running: raw.running as Report['running'],
    top_cards: top('card'),
    top_sessions: top('session'),
    trend_per_day: raw.trend_per_day as Report['trend_per_day'],
    health: raw.health as Report['health'],
    stats: raw.stats as Report['stats'],
  };
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

/** How long ago, coarse: an operator reads "3.2 h", not 11,520 s. Negative = the server's clock is behind. */
export function fmtAge(seconds: number): string {
  if (seconds < 0) return 'in the future';
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

/** "1 turn", "2 turns": counts in prose agree with their noun. */
export function count(n: Num, one: string, many = `${one}s`): string {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}

interface UsageColumn { header: string; value: (r: UsageRow) => string; priority: number }
// Priority: what stays when the terminal is narrow (lowest first).
const usageColumns: UsageColumn[] = [
  { header: 'subagents', value: (r) => fmtInt(r.subagents), priority: 0 },
  { header: 'async', value: (r) => fmtInt(r.async), priority: 4 },
  { header: 'usage reported', value: (r) => fmtInt(r.usage_reported), priority: 7 },
  { header: 'not reported', value: (r) => fmtInt(r.usage_not_reported), priority: 2 },
  { header: 'tokens (sum)', value: (r) => fmtInt(r.total_tokens), priority: 1 },
  { header: 'tokens (avg)', value: (r) => fmtInt(r.avg_tokens), priority: 5 },
  { header: 'tokens (max)', value: (r) => fmtInt(r.max_tokens), priority: 6 },
  { header: 'duration (avg)', value: (r) => fmtDuration(r.avg_duration_ms), priority: 3 },
  { header: 'duration (max)', value: (r) => fmtDuration(r.max_duration_ms), priority: 8 },
  { header: 'tool uses (avg)', value: (r) => fmtDec(r.avg_tool_uses, 1), priority: 9 },
];

export function depthLabel(depth: number | null): string {
  if (depth === null) return 'parent not captured';
  if (depth === 0) return 'launched by the agent';
  return `nested, depth ${depth}`;
}

const cardLabel = (r: { title: string | null; task_id: string }) => r.title ?? r.task_id;


function spanText(r: Report): string {
  const w = r.window;
  const asked = w.since || w.until ? `window ${w.since ?? 'the beginning'} to ${w.until ?? 'now'} (until exclusive)` : 'all time';
  const seen = w.first_observed ? `subagents observed ${w.first_observed} to ${w.last_observed}` : 'no subagent observed in it';
  return `${asked}; ${seen}`;
}

// ---------------------------------------------------------------------------------------------------
// Terminal: every text that came from the database goes through safe(); every line fits `width`.

export interface Style { bold(s: string): string; dim(s: string): string; bar(s: string): string }
const noStyle: Style = { bold: (s) => s, dim: (s) => s, bar: (s) => s };

/** Display length in terminal columns (code points; the report draws only narrow characters itself). */
const len = (s: string) => [...s].length;
function clip(s: string, n: number): string {
  const cps = [...s];
  return cps.length <= n ? s : cps.slice(0, Math.max(1, n - 1)).join('') + '…';
}
const padEnd = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - len(s)));
const padStart = (s: string, n: number) => ' '.repeat(Math.max(0, n - len(s))) + s;

/** Words wrapped to `width`, each line indented by `indent`. */
export function wrap(text: string, width: number, indent = '  '): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && len(indent + line + ' ' + word) > width) { lines.push(indent + clip(line, width - len(indent))); line = word; }
    else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(indent + clip(line, width - len(indent)));
  return lines.join('\n');
}

export interface Column { header: string; priority?: number; left?: boolean }

/**
 * A text table that fits `width`: the first column left-aligned (clipped with … if it must be), the
 * others right-aligned; when they do not all fit, the columns of highest priority number are left out
 * and a line says which (--json has them all).
 */
export function table(columns: Array<string | Column>, rows: string[][], style: Style = noStyle, width = 1000): string {
  const cols = columns.map((c, i) => ({ header: typeof c === 'string' ? c : c.header, priority: typeof c === 'string' ? i : c.priority ?? i,
    left: typeof c !== 'string' && Boolean(c.left), index: i }));
  const natural = cols.map((c) => Math.max(len(c.header), ...rows.map((r) => len(r[c.index]))));
  const minFirst = Math.min(natural[0], 14);
  const rest = (keep: typeof cols) => keep.slice(1).reduce((sum, c) => sum + 2 + natural[c.index], 0);
  let keep = [...cols];
  while (keep.length > 2 && 2 + minFirst + rest(keep) > width) {
    const drop = keep.slice(1).reduce((a, b) => (b.priority > a.priority ? b : a));
    keep = keep.filter((c) => c !== drop);
  }
  const first = Math.max(1, Math.min(natural[0], width - 2 - rest(keep)));
  const widths = keep.map((c, i) => (i === 0 ? first : natural[c.index]));
  const line = (cells: string[]) => '  ' + keep.map((c, i) =>
    (i === 0 ? padEnd(clip(cells[c.index], widths[0]), widths[0]) : c.left ? padEnd(cells[c.index], widths[i]) : padStart(cells[c.index], widths[i]))).join('  ');
  const out = [style.bold(line(cols.map((c) => c.header))), style.dim('  ' + widths.map((w) => '─'.repeat(w)).join('  ')), ...rows.map(line)];
  const left = cols.filter((c) => !keep.includes(c)).map((c) => c.header);
  if (left.length) out.push(style.dim(wrap(`(not shown at ${width} columns: ${left.join(', ')}; see --width or --json)`, width)));
  return out.join('\n');
}

/** A horizontal bar chart: one row per label, bars scaled to the largest value, as wide as `width` allows. */
export function barChart(rows: Array<[string, number, string?]>, style: Style = noStyle, width = 80): string {
  if (rows.length === 0) return style.dim('  (no data)');
  const max = Math.max(...rows.map(([, v]) => v), 1);
  const shown = rows.map(([, v, note]) => fmtInt(v) + (note ? ` ${note}` : ''));
  const vw = Math.max(...shown.map(len));
  const lw = Math.min(Math.max(...rows.map(([l]) => len(l))), Math.max(8, Math.floor(width / 3)));
  const barMax = Math.max(5, Math.min(width - lw - vw - 6, Math.floor(width / 2)));
  return rows.map(([label, v], i) => {
    const n = v === 0 ? 0 : Math.max(1, Math.round((v / max) * barMax));
    return `  ${padStart(clip(label, lw), lw)} │${style.bar('█'.repeat(n))} ${shown[i]}`;
  }).join('\n');
}

export function renderText(r: Report, style: Style = noStyle, width = 80): string {
  const o = r.overview;
  const sc = r.sessions_and_cards;
  const out: string[] = [];
  const t = (s: string | null | undefined) => safe(s ?? '-');
  const section = (title: string) => out.push('', style.bold(clip(title, width)));
  const kv = (rows: Array<[string, string]>) => table(['', 'value'], rows, style, width);

  out.push(style.bold(wrap(`subagent-context report: database ${t(r.database.database)} on ${t(r.database.host)}, schema ${t(r.schema)}`, width, '')));
  out.push(style.dim(wrap(`${spanText(r)}; generated ${r.window.as_of}`, width)));
  if (!['healthy', 'idle'].includes(r.health.status)) {
    out.push(style.bold(wrap(`health: ${t(r.health.status)}. ${statusFacts(r.health.status)?.sentence ?? ''}`, width)));
  }
  out.push(wrap(`${count(o.subagents, 'subagent')} (${fmtInt(o.live)} live, ${fmtInt(o.backfill)} backfilled) in ` +
    `${count(o.turns, 'turn')} of ${count(o.sessions, 'session')}. Usage was reported by ${count(o.usage_reported, 'subagent')} ` +
    `and not by ${fmtInt(o.usage_not_reported)}. Reported tokens: ${fmtInt(o.total_tokens)} in total, ` +
    `${fmtInt(o.max_tokens)} the most for one subagent.`, width));

  // The last 30 days in the terminal (the HTML and --json carry up to 90).
  const days = r.trend_per_day.slice(-30);
  section(`Subagents per day (UTC${days.length < r.trend_per_day.length || (days.length && days[0].day > (r.window.first_observed ?? '')) ? `, the last ${days.length} days` : ''})`);
  out.push(barChart(days.map((d) => [d.day, d.subagents,
    `(${fmtInt(d.async)} async${d.total_tokens === null ? '' : `, ${fmtInt(d.total_tokens)} tokens`})`]), style, width));

  section('Fan-out per turn (turns that launched N subagents)');
  out.push(barChart(r.fanout_per_turn.map((f) => [count(f.fanout, 'subagent'), f.turns]), style, width));

  section('Per card (task) and per session');
  out.push(kv([
    ['cards (tasks with a session)', fmtInt(sc.cards)],
    ['sessions', fmtInt(sc.sessions)],
    ['sessions per card   (what kandev shows)', fmtDec(sc.sessions_per_card)],
    ['subagents per card', fmtDec(sc.subagents_per_card)],
    ['subagents per session', fmtDec(sc.subagents_per_session)],
    ['model contexts per card (sessions + subagents)', fmtDec(sc.contexts_per_card)],
    ['sessions with subagents', fmtInt(sc.sessions_with_subagents)],
    ['most subagents in one session', fmtInt(sc.most_subagents_in_one_session)],
  ]));

  section('Subagents per session (sessions that launched N)');
  out.push(barChart(r.subagents_per_session.map((s) => [String(s.subagents), s.sessions]), style, width));

  const topCols = (first: string): Column[] => [{ header: first }, { header: 'subagents', priority: 1 }, { header: 'async', priority: 4 },
    { header: 'tokens', priority: 2 }, { header: 'not reported', priority: 3 }];
  const topRow = (x: TopRow, label: string) => [label, fmtInt(x.subagents), fmtInt(x.async), fmtInt(x.total_tokens), fmtInt(x.usage_not_reported)];
  const titleNote = () => { if (r.unavailable.titles) out.push(style.dim(wrap(`(${t(r.unavailable.titles)})`, width))); };
  section('Top cards by subagents launched');
  out.push(table(topCols('card'), r.top_cards.by_subagents.map((x) => topRow(x, t(cardLabel(x)))), style, width));
  titleNote();
  section('Top cards by tokens reported');
  out.push(r.top_cards.by_tokens.length === 0 ? style.dim('  (no tokens reported)')
    : table(topCols('card'), r.top_cards.by_tokens.map((x) => topRow(x, t(cardLabel(x)))), style, width));
  section('Top sessions by subagents launched');
  out.push(table(topCols('session (card)'), r.top_sessions.by_subagents.map((x) => topRow(x, `${t(x.id)} (${t(cardLabel(x))})`)), style, width));
  section('Top sessions by tokens reported');
  out.push(r.top_sessions.by_tokens.length === 0 ? style.dim('  (no tokens reported)')
    : table(topCols('session (card)'), r.top_sessions.by_tokens.map((x) => topRow(x, `${t(x.id)} (${t(cardLabel(x))})`)), style, width));

  const usageTable = (first: string, rows: Array<UsageRow & { label: string }>) => table(
    [{ header: first }, ...usageColumns.map((c) => ({ header: c.header, priority: c.priority + 1 }))],
    rows.map((row) => [t(row.label), ...usageColumns.map((c) => c.value(row))]), style, width);
  section('By subagent_type');
  out.push(usageTable('subagent_type', r.by_subagent_type.map((x) => ({ ...x, label: x.subagent_type }))));
  section('By model');
  out.push(usageTable('model', r.by_model.map((x) => ({ ...x, label: x.model }))));
  out.push(style.dim(wrap(`${UNKNOWN} = not reported by the agent (async launches never report usage); it is not 0.`, width)));

  section('By agent status (as the agent reported it)');
  out.push(table(['agent_status', 'subagents', 'usage reported', 'model reported'],
    r.agent_status.map((s) => [t(s.agent_status), fmtInt(s.subagents), fmtInt(s.usage_reported), fmtInt(s.model_reported)]), style, width));

  section('Nesting');
  if (r.nesting === null) out.push(wrap(r.unavailable.nesting, width));
  else out.push(table(['', 'subagents'], r.nesting.map((n) => [depthLabel(n.depth), fmtInt(n.subagents)]), style, width));

  section('Settled and still running');
  const st = r.settlement;
  out.push(kv([
    ['settled, synchronous (result returned)', fmtInt(st.settled_sync)],
    ['settled, background (launch returned)', fmtInt(st.settled_async)],
    ['still running (not settled)', fmtInt(st.outstanding)],
    ['still running, background', fmtInt(st.outstanding_async)],
    ['median run time, synchronous (launch to result)', st.median_seconds_to_settle_sync === null ? UNKNOWN : `${fmtDec(st.median_seconds_to_settle_sync, 1)} s`],
    [`median run time reported by the agent (${count(st.run_time_reported, 'subagent')})`,
      st.median_reported_run_seconds === null ? UNKNOWN : `${fmtDec(st.median_reported_run_seconds, 1)} s`],
  ]));
  out.push(style.dim(wrap('A background launch settles when the launch returns, not when the subagent finishes: ' +
    'its run time is known only where the agent reported it.', width)));
  if (r.running.length) {
    out.push('', style.bold(clip(`Still running, oldest first${st.outstanding > r.running.length ? ` (${r.running.length} of ${fmtInt(st.outstanding)})` : ''}`, width)));
    out.push(table([{ header: 'card / session' }, { header: 'age', priority: 1 }, { header: 'since (UTC)', priority: 5, left: true },
      { header: 'subagent_type', priority: 2, left: true }, { header: 'model', priority: 4, left: true }, { header: 'async', priority: 3 }],
    r.running.map((x) => [`${t(cardLabel(x))} / ${t(x.task_session_id)}`, fmtAge(x.age_seconds), x.observed_at,
      t(x.subagent_type ?? '(not reported)'), t(x.model ?? '(not reported)'), x.async ? 'yes' : 'no']), style, width));
  }
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------------
// HTML: one page, inline CSS and SVG, no script, nothing fetched.

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]!));
}

/** A vertical bar chart as inline SVG that scales to its container; every bar carries its label and value. */
export function svgBarChart(id: string, title: string, bars: Array<{ label: string; value: number }>, W = 560): string {
  const H = 220, left = 40, bottom = 40, top = 20;
  const max = Math.max(1, ...bars.map((b) => b.value));
  const slot = bars.length ? (W - left - 10) / bars.length : 0;
  const bw = Math.max(4, Math.min(60, slot * 0.7));
  // Too many bars for every label (a long trend): label every k-th one.
  const every = Math.max(1, Math.ceil(bars.length / Math.floor((W - left) / 70)));
  const body = bars.map((b, i) => {
    const h = Math.round(((H - bottom - top) * b.value) / max);
    const x = left + i * slot + (slot - bw) / 2;
    const y = H - bottom - h;
    const label = escapeHtml(b.label);
    return `<g class="bar" data-label="${label}" data-value="${b.value}">` +
      `<rect x="${x.toFixed(1)}" y="${y}" width="${bw.toFixed(1)}" height="${h}" fill="#4c78a8"><title>${label}: ${b.value}</title></rect>` +
      (b.value === 0 && bars.length > 12 ? '' : `<text class="value" x="${(x + bw / 2).toFixed(1)}" y="${y - 4}" text-anchor="middle">${fmtInt(b.value)}</text>`) +
      (i % every === 0 ? `<text class="label" x="${(x + bw / 2).toFixed(1)}" y="${H - bottom + 16}" text-anchor="middle">${label}</text>` : '') + `</g>`;
  }).join('');
  return `<figure><figcaption>${escapeHtml(title)}</figcaption>` +
    `<svg id="${id}" class="chart" role="img" aria-label="${escapeHtml(title)}" viewBox="0 0 ${W} ${H}" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">` +
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
      `<text x="${left - 6}" y="${y + 16}" text-anchor="end">${escapeHtml(clip(r.label, 26))}</text>` +
      `<rect class="reported" x="${left}" y="${y + 4}" width="${w1}" height="16" fill="#54a24b"><title>usage reported: ${r.reported}</title></rect>` +
      `<rect class="not-reported" x="${left + w1}" y="${y + 4}" width="${w2}" height="16" fill="#bab0ac"><title>usage not reported: ${r.notReported}</title></rect>` +
      `<text x="${left + w1 + w2 + 6}" y="${y + 16}">${r.reported} / ${r.reported + r.notReported}</text></g>`;
  }).join('');
  const legendY = top + rows.length * rowH + 18;
  return `<figure><figcaption>${escapeHtml(title)}</figcaption>` +
    `<svg id="${id}" class="chart" role="img" aria-label="${escapeHtml(title)}" viewBox="0 0 ${W} ${H}" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">${body}` +
    `<rect x="${left}" y="${legendY - 10}" width="12" height="12" fill="#54a24b"/><text x="${left + 16}" y="${legendY}">usage reported</text>` +
    `<rect x="${left + 130}" y="${legendY - 10}" width="12" height="12" fill="#bab0ac"/><text x="${left + 146}" y="${legendY}">not reported (unknown, not 0)</text>` +
    `</svg></figure>`;
}

/** A table in a container that scrolls sideways on a narrow screen, so the page itself never does. */
function htmlTable(id: string, header: string[], rows: string[][], names = 1, prose: number[] = []): string {
  return `<div class="scroll"><table id="${id}"><thead><tr>${header.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>` +
    rows.map((r) => `<tr>${r.map((c, i) => {
      const cls = [prose.includes(i) ? 'prose' : i < names ? 'name' : 'num', c === UNKNOWN ? 'unknown' : ''].filter(Boolean).join(' ');
      return `<td class="${cls}">${escapeHtml(c)}</td>`;
    }).join('')}</tr>`).join('') +
    `</tbody></table></div>`;
}

export function renderHtml(r: Report, generatedAt = new Date().toISOString()): string {
  const o = r.overview;
  const sc = r.sessions_and_cards;
  const st = r.settlement;
  const h = r.health;
  const kv = (id: string, rows: Array<[string, string]>) =>
    `<div class="scroll"><table id="${id}" class="kv"><tbody>${rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td class="num" data-key="${escapeHtml(k)}">${escapeHtml(v)}</td></tr>`).join('')}</tbody></table></div>`;
  const usage = (rows: Array<UsageRow & { label: string }>) => rows.map((x) => [x.label, ...usageColumns.map((c) => c.value(x))]);
  const alarm = !['healthy', 'idle'].includes(h.status);
  const tone = h.status === 'not_activated' ? 'warn' : 'alarm';
  const banner = alarm
    ? `<div id="status-banner" class="banner ${tone}" role="alert"><strong>${escapeHtml(h.status)}</strong>` +
      (h.status === 'shortfall' ? ` (${escapeHtml(fmtInt(h.shortfall))} missing)` : '') + `: ${escapeHtml(statusFacts(h.status)?.sentence ?? '')}</div>` : '';
  const top = (id: string, first: string, rows: TopRow[], label: (x: TopRow) => string[]) => rows.length === 0 ? `<p class="note" id="${id}">None in this window.</p>`
    : htmlTable(id, [first, ...(first === 'session' ? ['card'] : []), 'subagents', 'async', 'tokens', 'not reported'],
      rows.map((x) => [...label(x), fmtInt(x.subagents), fmtInt(x.async), fmtInt(x.total_tokens), fmtInt(x.usage_not_reported)]),
      first === 'session' ? 2 : 1, [first === 'session' ? 1 : 0]);
  const cardTop = (id: string, rows: TopRow[]) => top(id, 'card', rows, (x) => [cardLabel(x)]);
  const sessionTop = (id: string, rows: TopRow[]) => top(id, 'session', rows, (x) => [x.id, cardLabel(x)]);
  const db = r.database;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>subagent-context report: ${escapeHtml(db.database)} / ${escapeHtml(r.schema)}</title>
<style>
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1800px;color:#222;padding:0 16px 2em}
h1{font-size:1.5em;margin:.8em 0 .3em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.unknown{color:#999;font-style:italic}
td.name{white-space:nowrap}td.prose{min-width:12em;overflow-wrap:anywhere}.scroll{overflow-x:auto;max-width:100%}
.kv th{font-weight:normal;color:#555}figure{margin:1em 0;min-width:0}figcaption{font-weight:600;margin-bottom:.3em}
svg.chart{display:block;width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#333}.note{color:#666}.status{font-weight:600}
.grid{display:grid;grid-template-columns:minmax(0,1fr);gap:0 32px}
@media (min-width:900px){.grid{grid-template-columns:minmax(0,1fr) minmax(0,1fr)}}
.banner{padding:.8em 1em;border-radius:6px;margin:1em 0;font-size:1.05em}
.banner.alarm{background:#b3261e;color:#fff}.banner.warn{background:#f9a825;color:#1a1a1a}
dl.meta{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px;margin:.5em 0}
dl.meta dt{color:#555}dl.meta dd{margin:0;overflow-wrap:anywhere}
</style></head><body>
<h1>subagent-context report</h1>
${banner}
<dl class="meta" id="identity">
<dt>database</dt><dd><span id="db-host">${escapeHtml(db.host)}</span>${db.server_port ? `:${db.server_port}` : ''} / <span id="db-name">${escapeHtml(db.database)}</span>, schema <span id="db-schema">${escapeHtml(r.schema)}</span></dd>
<dt>time span</dt><dd id="span">${escapeHtml(spanText(r))}</dd>
<dt>generated</dt><dd id="generated">${escapeHtml(generatedAt)}</dd>
<dt>health</dt><dd><span id="health-status" class="status">${escapeHtml(h.status)}</span> (shortfall ${escapeHtml(fmtInt(h.shortfall))}, excess ${escapeHtml(fmtInt(h.excess))}; not windowed)</dd>
</dl>
<p class="note">"unknown" means the agent did not report the value; it is never 0.</p>
<h2>Overview</h2>
${kv('overview', [
  ['subagents', fmtInt(o.subagents)], ['live', fmtInt(o.live)], ['backfilled', fmtInt(o.backfill)],
  ['turns with subagents', fmtInt(o.turns)], ['sessions with subagents', fmtInt(o.sessions)],
  ['usage reported', fmtInt(o.usage_reported)], ['usage not reported', fmtInt(o.usage_not_reported)],
  ['tokens reported (sum)', fmtInt(o.total_tokens)], ['largest total_tokens', fmtInt(o.max_tokens)],
  ['subagent_type missing', fmtInt(o.subagent_type_missing)]])}
<h2>Subagents per day (UTC)</h2>
${svgBarChart('chart-trend', 'Subagents first observed per day', r.trend_per_day.map((d) => ({ label: d.day, value: d.subagents })), 1200)}
<h2>Fan-out</h2>
<div class="grid">
${svgBarChart('chart-fanout', 'Turns that launched N subagents', r.fanout_per_turn.map((f) => ({ label: String(f.fanout), value: f.turns })))}
${svgBarChart('chart-per-session', 'Sessions that launched N subagents', r.subagents_per_session.map((s) => ({ label: String(s.subagents), value: s.sessions })))}
</div>
<h2>Per card and per session</h2>
${kv('cards', [
  ['cards (tasks with a session)', fmtInt(sc.cards)], ['sessions', fmtInt(sc.sessions)],
  ['sessions per card (what kandev shows)', fmtDec(sc.sessions_per_card)],
  ['subagents per card', fmtDec(sc.subagents_per_card)], ['subagents per session', fmtDec(sc.subagents_per_session)],
  ['model contexts per card', fmtDec(sc.contexts_per_card)], ['most subagents in one session', fmtInt(sc.most_subagents_in_one_session)]])}
<div class="grid">
<div><h3>Top cards by subagents launched</h3>${cardTop('top-cards-subagents', r.top_cards.by_subagents)}</div>
<div><h3>Top cards by tokens reported</h3>${cardTop('top-cards-tokens', r.top_cards.by_tokens)}</div>
<div><h3>Top sessions by subagents launched</h3>${sessionTop('top-sessions-subagents', r.top_sessions.by_subagents)}</div>
<div><h3>Top sessions by tokens reported</h3>${sessionTop('top-sessions-tokens', r.top_sessions.by_tokens)}</div>
</div>
${r.unavailable.titles ? `<p class="note">${escapeHtml(r.unavailable.titles)}</p>` : ''}
<h2>By subagent_type</h2>
<div class="grid">
${svgUsageChart('chart-usage-by-type', 'Usage reported vs not reported, per subagent_type', r.by_subagent_type.map((x) => ({ label: x.subagent_type, reported: x.usage_reported, notReported: x.usage_not_reported })))}
${svgUsageChart('chart-usage-by-model', 'Usage reported vs not reported, per model', r.by_model.map((x) => ({ label: x.model, reported: x.usage_reported, notReported: x.usage_not_reported })))}
</div>
${htmlTable('by-subagent-type', ['subagent_type', ...usageColumns.map((c) => c.header)], usage(r.by_subagent_type.map((x) => ({ ...x, label: x.subagent_type }))))}
<h2>By model</h2>
${htmlTable('by-model', ['model', ...usageColumns.map((c) => c.header)], usage(r.by_model.map((x) => ({ ...x, label: x.model }))))}
<h2>By agent status and nesting</h2>
<div class="grid">
${svgBarChart('chart-agent-status', 'Subagents per agent-reported status', r.agent_status.map((s) => ({ label: s.agent_status, value: s.subagents })))}
<div>${r.nesting === null ? `<p id="nesting">${escapeHtml(r.unavailable.nesting)}</p>`
  : htmlTable('nesting', ['', 'subagents'], r.nesting.map((n) => [depthLabel(n.depth), fmtInt(n.subagents)]))}</div>
</div>
<h2>Settled and still running</h2>
${kv('settlement', [
  ['settled, synchronous (result returned)', fmtInt(st.settled_sync)], ['settled, background (launch returned)', fmtInt(st.settled_async)],
  ['still running', fmtInt(st.outstanding)], ['still running, background', fmtInt(st.outstanding_async)],
  ['median run time, synchronous (s)', fmtDec(st.median_seconds_to_settle_sync, 1)],
  [`median run time reported by the agent (s, ${count(st.run_time_reported, 'subagent')})`, fmtDec(st.median_reported_run_seconds, 1)],
  ['oldest still running since', st.oldest_outstanding_since ?? '-']])}
<p class="note">A background launch settles when the launch returns, not when the subagent finishes: its run time is known only where the agent reported it.</p>
${r.running.length === 0 ? '<p class="note" id="running">Nothing is running.</p>'
  : htmlTable('running', ['card', 'session', 'age', 'since (UTC)', 'subagent_type', 'model', 'async'],
    r.running.map((x) => [cardLabel(x), x.task_session_id, fmtAge(x.age_seconds), x.observed_at, x.subagent_type ?? '(not reported)',
      x.model ?? '(not reported)', x.async ? 'yes' : 'no']), 2, [0])}
</body></html>
`;
}
