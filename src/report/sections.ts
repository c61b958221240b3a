// What the report shows, described once: every section's title, its figures (label, value, format),
// its chart and its table. The terminal (terminal.ts) and the page (html.ts) both draw this; neither
// writes a label of its own. Values are plain text as the database gave them: each renderer makes them
// safe for its medium.
import { statusFacts } from '../status.js';
import type { Column } from './layout.js';
import type { Report, TopRow, UsageRow } from './model.js';
import { UNKNOWN, cardLabel, count, depthLabel, fmtAge, fmtDec, fmtDuration, fmtInt, fmtSeconds } from './format.js';

/** One bar of a histogram: `shown` is the value as written; `note` is said after it. */
/** `axis`, when given, is what the page writes under the bar instead of `label` (which stays its name). */
export interface Bar { label: string; value: number; shown: string; note?: string; axis?: string }
/**
 * A histogram: vertical bars on the page, horizontal ones on the terminal. `condensed`, when given, is what
 * the terminal shows instead of `bars`: the page draws every day of a trend as an axis, the terminal writes
 * a run of days without data as one row.
 */
export interface Chart { id: string; caption: string; bars: Bar[]; condensed?: Bar[] }
/** Usage reported against not reported, per group: a page-only picture of what the table beside it says. */
export interface StackChart { id: string; caption: string; rows: Array<{ label: string; reported: number; notReported: number }> }
/** A table; `facts` is a two-column list of label and value. */
export interface Table { id: string; columns: Column[]; rows: string[][]; facts?: boolean }

export interface Section {
  id: string;
  title: string;
  /** 2 for a part of the report, 3 for one of several views of a part. */
  level: 2 | 3;
  /** The page may put it beside its neighbour of the same kind. */
  half?: boolean;
  chart?: Chart;
  stack?: StackChart;
  table?: Table;
  /** Said instead of the table when it has no row. */
  empty?: string;
  notes?: string[];
}

export interface ReportDocument {
  title: string;
  /** Which database, schema, window and time: the same facts in both media. */
  where: string;
  span: string;
  generated: string;
  health: { status: string; shortfall: string; excess: string; alarm: { tone: 'alarm' | 'warn'; text: string } | null };
  summary: string;
  unknownNote: string;
  sections: Section[];
}

/** The trend's length in days; sql/report/trend-per-day.sql returns at most this many. */
export const TREND_DAYS = 90;

/** The window asked for, and the span of subagents observed in it. */
export function spanText(r: Report): string {
  const w = r.window;
  const asked = w.since || w.until ? `window ${w.since ?? 'the beginning'} to ${w.until ?? 'now'} (until exclusive)` : 'all time';
  const seen = w.first_observed ? `subagents observed ${w.first_observed} to ${w.last_observed}` : 'no subagent observed in it';
  return `${asked}; ${seen}`;
}

const facts = (id: string, rows: Array<[string, string]>): Table =>
  ({ id, columns: [{ header: '' }, { header: 'value' }], rows: rows.map(([k, v]) => [k, v]), facts: true });

const usageColumns: Array<{ header: string; value: (r: UsageRow) => string; priority: number }> = [
  // Priority: what stays when the terminal is narrow (lowest first).
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

function usageSection(id: string, dimension: 'subagent_type' | 'model', rows: Array<UsageRow & { label: string }>): Section {
  return {
    id, title: `By ${dimension}`, level: 2,
    stack: { id: `chart-usage-by-${dimension === 'model' ? 'model' : 'type'}`, caption: `Usage reported vs not reported, per ${dimension}`,
      rows: rows.map((x) => ({ label: x.label, reported: x.usage_reported, notReported: x.usage_not_reported })) },
    table: { id, columns: [{ header: dimension }, ...usageColumns.map((c) => ({ header: c.header, priority: c.priority + 1 }))],
      rows: rows.map((x) => [x.label, ...usageColumns.map((c) => c.value(x))]) },
  };
}

function topSection(id: string, title: string, level: 'card' | 'session', rows: TopRow[], empty: string, notes?: string[]): Section {
  const columns: Column[] = [{ header: level === 'card' ? 'card' : 'session (card)', wrap: true }, { header: 'subagents', priority: 1 },
    { header: 'async', priority: 4 }, { header: 'tokens', priority: 2 }, { header: 'not reported', priority: 3 }];
  return {
    id, title, level: 3, half: true, empty, notes,
    table: { id, columns, rows: rows.map((x) => [level === 'card' ? cardLabel(x) : `${x.id} (${cardLabel(x)})`,
      fmtInt(x.subagents), fmtInt(x.async), fmtInt(x.total_tokens), fmtInt(x.usage_not_reported)]) },
  };
}

/** Days with subagents as they are, and each run of days without any as one row: "none through …". */
function condenseDays(bars: Bar[]): Bar[] {
  const out: Bar[] = [];
  for (let i = 0; i < bars.length;) {
    if (bars[i]!.value > 0) { out.push(bars[i++]!); continue; }
    let j = i;
    while (j + 1 < bars.length && bars[j + 1]!.value === 0) j++;
    out.push({ label: bars[i]!.label, value: 0, shown: 'none',
      note: j > i ? `through ${bars[j]!.label} (${count(j - i + 1, 'day')})` : undefined });
    i = j + 1;
  }
  return out;
}

/** The trend's heading says which days it shows, and the note how to see others. */
function trendSection(r: Report): Section {
  const days = r.trend_per_day;
  const first = days[0]?.day, last = days.at(-1)?.day;
  const cut = first !== undefined && r.window.first_observed !== null && r.window.first_observed.slice(0, 10) < first;
  const bars = days.map((d) => ({ label: d.day, value: d.subagents, shown: fmtInt(d.subagents),
    note: `(${fmtInt(d.async)} async${d.total_tokens === null ? '' : `, ${fmtInt(d.total_tokens)} tokens`})` }));
  return {
    id: 'trend', level: 2,
    title: first ? `Subagents per day (UTC), ${first} to ${last}` : 'Subagents per day (UTC)',
    chart: { id: 'chart-trend', caption: `Subagents first observed per day${days.length ? `: ${count(days.length, 'day')}` : ''}`,
      bars, condensed: condenseDays(bars) },
    notes: cut ? [`The last ${TREND_DAYS} days of the window, which holds subagents from ${r.window.first_observed!.slice(0, 10)} on: ` +
      `see earlier days with --until ${first}.`] : undefined,
  };
}

export function describeReport(r: Report, generatedAt: string): ReportDocument {
  const o = r.overview, sc = r.sessions_and_cards, st = r.settlement, h = r.health, db = r.database;
  const alarmed = !['healthy', 'idle'].includes(h.status);
  const titles = r.unavailable.titles ? [`(${r.unavailable.titles})`] : undefined;
  const running = `Still running, oldest first${st.outstanding > r.running.length ? ` (${r.running.length} of ${fmtInt(st.outstanding)})` : ''}`;
  return {
    title: 'subagent-context report',
    where: `${db.database} on ${db.host}${db.server_port ? `:${db.server_port}` : ''}, schema ${r.schema}`,
    span: spanText(r),
    generated: generatedAt,
    health: {
      status: h.status, shortfall: fmtInt(h.shortfall), excess: fmtInt(h.excess),
      alarm: alarmed ? {
        tone: h.status === 'not_activated' || h.status === 'behind' ? 'warn' : 'alarm',
        text: `${h.status}${h.status === 'shortfall' ? ` (${fmtInt(h.shortfall)} missing)` : ''}: ${statusFacts(h.status)?.sentence ?? ''}`,
      } : null,
    },
    summary: `${count(o.subagents, 'subagent')} (${fmtInt(o.live)} live, ${fmtInt(o.backfill)} backfilled) in ` +
      `${count(o.turns, 'turn')} of ${count(o.sessions, 'session')}. Usage was reported by ${count(o.usage_reported, 'subagent')} ` +
      `and not by ${fmtInt(o.usage_not_reported)}. Reported tokens: ${fmtInt(o.total_tokens)} in total, ` +
      `${fmtInt(o.max_tokens)} the most for one subagent.`,
    unknownNote: `"${UNKNOWN}" means the agent did not report the value (async launches never report usage); it is never 0.`,
    sections: [
      { id: 'overview-section', title: 'Overview', level: 2, table: facts('overview', [
        ['subagents', fmtInt(o.subagents)], ['live', fmtInt(o.live)], ['backfilled', fmtInt(o.backfill)],
        ['turns with subagents', fmtInt(o.turns)], ['sessions with subagents', fmtInt(o.sessions)],
        ['usage reported', fmtInt(o.usage_reported)], ['usage not reported', fmtInt(o.usage_not_reported)],
        ['tokens reported (sum)', fmtInt(o.total_tokens)], ['largest total_tokens', fmtInt(o.max_tokens)],
        ['subagent_type missing', fmtInt(o.subagent_type_missing)]]) },
      trendSection(r),
      { id: 'fanout', title: 'Fan-out per turn (turns that launched N subagents)', level: 2, half: true,
        chart: { id: 'chart-fanout', caption: 'Turns that launched N subagents',
          // Under a bar the page writes N alone, which fits every bar from a phone up; the caption says what N is.
          bars: r.fanout_per_turn.map((f) => ({ label: count(f.fanout, 'subagent'), axis: fmtInt(f.fanout), value: f.turns,
            shown: fmtInt(f.turns) })) } },
      { id: 'per-session', title: 'Subagents per session (sessions that launched N)', level: 2, half: true,
        chart: { id: 'chart-per-session', caption: 'Sessions that launched N subagents',
          bars: r.subagents_per_session.map((s) => ({ label: String(s.subagents), value: s.sessions, shown: fmtInt(s.sessions) })) } },
      { id: 'cards-section', title: 'Per card (task) and per session', level: 2, table: facts('cards', [
        ['cards (tasks with a session)', fmtInt(sc.cards)],
        ['sessions', fmtInt(sc.sessions)],
        ['sessions per card (what kandev shows)', fmtDec(sc.sessions_per_card)],
        ['subagents per card', fmtDec(sc.subagents_per_card)],
        ['subagents per session', fmtDec(sc.subagents_per_session)],
        ['model contexts per card (sessions + subagents)', fmtDec(sc.contexts_per_card)],
        ['sessions with subagents', fmtInt(sc.sessions_with_subagents)],
        ['most subagents in one session', fmtInt(sc.most_subagents_in_one_session)]]) },
      topSection('top-cards-subagents', 'Top cards by subagents launched', 'card', r.top_cards.by_subagents, 'No subagent in this window.', titles),
      topSection('top-cards-tokens', 'Top cards by tokens reported', 'card', r.top_cards.by_tokens, 'No tokens reported in this window.'),
      topSection('top-sessions-subagents', 'Top sessions by subagents launched', 'session', r.top_sessions.by_subagents, 'No subagent in this window.'),
      topSection('top-sessions-tokens', 'Top sessions by tokens reported', 'session', r.top_sessions.by_tokens, 'No tokens reported in this window.'),
      usageSection('by-subagent-type', 'subagent_type', r.by_subagent_type.map((x) => ({ ...x, label: x.subagent_type }))),
      usageSection('by-model', 'model', r.by_model.map((x) => ({ ...x, label: x.model }))),
      { id: 'agent-status-section', title: 'By agent status (as the agent reported it)', level: 2, half: true,
        chart: { id: 'chart-agent-status', caption: 'Subagents per agent-reported status',
          bars: r.agent_status.map((s) => ({ label: s.agent_status, value: s.subagents, shown: fmtInt(s.subagents) })) },
        table: { id: 'agent-status', columns: [{ header: 'agent_status' }, { header: 'subagents' }, { header: 'usage reported' }, { header: 'model reported' }],
          rows: r.agent_status.map((s) => [s.agent_status, fmtInt(s.subagents), fmtInt(s.usage_reported), fmtInt(s.model_reported)]) } },
      { id: 'nesting-section', title: 'Nesting', level: 2, half: true,
        empty: r.nesting === null ? r.unavailable.nesting : 'No subagent in this window.',
        table: { id: 'nesting', columns: [{ header: 'depth' }, { header: 'subagents' }],
          rows: (r.nesting ?? []).map((n) => [depthLabel(n.depth), fmtInt(n.subagents)]) } },
      { id: 'settlement-section', title: 'Settled and still running', level: 2, table: facts('settlement', [
        ['settled, synchronous (result returned)', fmtInt(st.settled_sync)],
        ['settled, background (launch returned)', fmtInt(st.settled_async)],
        ['still running (not settled)', fmtInt(st.outstanding)],
        ['still running, background', fmtInt(st.outstanding_async)],
        ['median run time, synchronous (launch to result)', fmtSeconds(st.median_seconds_to_settle_sync)],
        [`median run time reported by the agent (${count(st.run_time_reported, 'subagent')})`, fmtSeconds(st.median_reported_run_seconds)],
        ['oldest still running since (UTC)', st.oldest_outstanding_since ?? '-']]),
      notes: ['A background launch settles when the launch returns, not when the subagent finishes: ' +
        'its run time is known only where the agent reported it.'] },
      { id: 'running-section', title: running, level: 3, empty: 'Nothing is running.',
        table: { id: 'running', columns: [{ header: 'card / session', wrap: true }, { header: 'age', priority: 1 },
          { header: 'since (UTC)', priority: 5, left: true }, { header: 'subagent_type', priority: 2, left: true },
          { header: 'model', priority: 4, left: true }, { header: 'async', priority: 3 }],
        rows: r.running.map((x) => [`${cardLabel(x)} / ${x.task_session_id}`, fmtAge(x.age_seconds), x.observed_at,
          x.subagent_type ?? '(not reported)', x.model ?? '(not reported)', x.async ? 'yes' : 'no']) } },
    ],
  };
}
