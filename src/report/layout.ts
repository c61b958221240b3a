// Text layout for the terminal: tables and bar charts that fit a width. Pure: strings in, lines out.
// It measures code points, so it must be given text already made terminal-safe.

export interface Style { bold(s: string): string; dim(s: string): string; bar(s: string): string }
export const noStyle: Style = { bold: (s) => s, dim: (s) => s, bar: (s) => s };

/** Display length in terminal columns (code points; the report draws only narrow characters itself). */
export const len = (s: string) => [...s].length;

/** `s` cut to `n` columns, with … where it was cut. */
export function clip(s: string, n: number): string {
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

/**
 * A table column. `priority`: which columns stay when the width is short (lowest first; the first
 * column always stays). `left`: left-aligned text (the first column always is; the others are numbers,
 * right-aligned). `wrap`: prose a page may wrap (a card's title), kept on one line in the terminal.
 */
export interface Column { header: string; priority?: number; left?: boolean; wrap?: boolean }

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

/**
 * A horizontal bar chart: one row per label, bars scaled to the largest value, as wide as `width`
 * allows. Each row is [label, value, shown value, note].
 */
export function barChart(rows: Array<{ label: string; value: number; shown: string; note?: string }>, style: Style = noStyle, width = 80): string {
  if (rows.length === 0) return style.dim('  (no data)');
  const max = Math.max(...rows.map((r) => r.value), 1);
  const shown = rows.map((r) => r.shown + (r.note ? ` ${r.note}` : ''));
  // The room the bars leave is for the text after a bar: a row without a bar may run past it.
  const barred = shown.filter((_s, i) => rows[i]!.value > 0);
  const vw = Math.max(...(barred.length ? barred : shown).map(len));
  const lw = Math.min(Math.max(...rows.map((r) => len(r.label))), Math.max(8, Math.floor(width / 3)));
  const barMax = Math.max(5, Math.min(width - lw - vw - 6, Math.floor(width / 2)));
  return rows.map((r, i) => {
    const n = r.value === 0 ? 0 : Math.max(1, Math.round((r.value / max) * barMax));
    return `  ${padStart(clip(r.label, lw), lw)} │${style.bar('█'.repeat(n))} ${shown[i]}`;
  }).join('\n');
}
