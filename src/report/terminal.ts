// The report on a terminal: the sections of sections.ts as text tables and bar charts that fit `width`.
// Every text is passed through the terminal-safety rule (safe(): control characters shown as \x1b, …)
// before it is measured and laid out.
import { safe } from '../output.js';
import { barChart, clip, noStyle, table, wrap, type Style } from './layout.js';
import type { Report } from './model.js';
import { describeReport, type Section } from './sections.js';

/** The terminal-safety rule for text from the database: nothing reaches the terminal raw. */
const terminalSafe = (s: string | null | undefined) => safe(s ?? '-');

/** One section: its title, then its table when it has one (else its chart), then its notes. */
function drawSection(s: Section, style: Style, width: number): string[] {
  const out = ['', style.bold(clip(terminalSafe(s.title), width))];
  const empty = s.table ? s.table.rows.length === 0 : (s.chart?.bars.length ?? 0) === 0;
  if (empty && s.empty) out.push(style.dim(wrap(terminalSafe(s.empty), width)));
  else if (s.table) {
    const columns = s.table.columns.map((c) => ({ ...c, header: terminalSafe(c.header) }));
    out.push(table(columns, s.table.rows.map((row) => row.map(terminalSafe)), style, width));
  } else if (s.chart) {
    out.push(barChart((s.chart.condensed ?? s.chart.bars).map((b) => ({ ...b, label: terminalSafe(b.label) })), style, width));
  }
  for (const note of s.notes ?? []) out.push(style.dim(wrap(terminalSafe(note), width)));
  return out;
}

export function renderText(r: Report, style: Style = noStyle, width = 80): string {
  const doc = describeReport(r, r.window.as_of);
  const out: string[] = [];
  out.push(style.bold(wrap(terminalSafe(`${doc.title}: database ${doc.where}`), width, '')));
  out.push(style.dim(wrap(terminalSafe(`${doc.span}; generated ${doc.generated}`), width)));
  if (doc.health.alarm) out.push(style.bold(wrap(terminalSafe(`health: ${doc.health.alarm.text}`), width)));
  out.push(wrap(terminalSafe(doc.summary), width));
  out.push(style.dim(wrap(terminalSafe(doc.unknownNote), width)));
  for (const s of doc.sections) out.push(...drawSection(s, style, width));
  return out.join('\n');
}
