// The report as one HTML page: the sections of sections.ts as inline SVG charts and tables, with inline
// CSS, no script and nothing fetched. Charts are laid out in percent of their width and their text in
// CSS pixels, so labels keep their size from a phone to a wide screen; a table wider than its box
// scrolls sideways and says so.
import { safe } from '../output.js';
import { UNKNOWN, fmtInt } from './format.js';
import type { Report } from './model.js';
import { describeReport, type Chart, type Section, type StackChart, type Table } from './sections.js';

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]!));
}

/** Text from the database on the page: control and bidi characters shown escaped (\x1b), as on the terminal, then HTML-escaped. */
export const htmlText = (s: string) => escapeHtml(safe(s));

/** Chart text size in CSS pixels, and what one character of it takes, roughly (for spacing labels). */
const FONT_PX = 12;
const CHAR_PX = 7.2;

/**
 * Which labels a chart of `n` bars can show at each width its box may have: every k-th, so that labels of
 * `labelPx` do not overlap. Each label carries the class of each width it shows at; the page's CSS
 * (container queries on the figure) shows those of the width it has: w0 below 600 px (counted as 300,
 * a phone's), w1 from 600, w2 from 1100.
 */
export const LABEL_WIDTHS = [{ cls: 'w0', px: 300 }, { cls: 'w1', px: 600 }, { cls: 'w2', px: 1100 }] as const;
export function labelClasses(n: number, labelPx: number, edges = false): string[] {
  const every = LABEL_WIDTHS.map((w) => Math.max(1, Math.ceil(n / Math.max(1, Math.floor(w.px / labelPx)))));
  // With `edges`, the first and the last label are always shown, anchored inside the chart (so they take
  // a whole label's width from the edge): the stride's labels next to them give way.
  const shown = (i: number, k: number) => (edges
    ? i === 0 || i === n - 1 || (i % k === 0 && i >= 1.5 * k && n - 1 - i >= 1.5 * k)
    : i % k === 0);
  return Array.from({ length: n }, (_, i) => LABEL_WIDTHS.filter((_w, j) => shown(i, every[j])).map((w) => w.cls).join(' '));
}

const textPx = (s: string) => [...s].length * CHAR_PX + 12;
const pct = (x: number) => `${x.toFixed(3)}%`;

/** A vertical bar chart: bars placed in percent of the width, so it fills its box at any size. */
export function svgBarChart(c: Chart): string {
  const n = c.bars.length;
  const max = Math.max(1, ...c.bars.map((b) => b.value));
  const slot = n ? 100 / n : 0;
  const bw = slot * 0.7;
  // Past 6 bars, where a label is wider than its slot at the narrowest width, the first and last slots are
  // too narrow to centre it on: it is anchored at the edge, and the stride's labels next to it give way.
  // Labels that fit their slots (a fan-out's N) are centred, every one.
  const edgesFor = (px: number) => n > 6 && px > LABEL_WIDTHS[0].px / n;
  const axis = (b: (typeof c.bars)[number]) => b.axis ?? b.label;
  const labelPx = Math.max(0, ...c.bars.map((b) => textPx(safe(axis(b)))));
  const valuePx = Math.max(0, ...c.bars.map((b) => textPx(b.shown)));
  // Many bars whose slots are still a line of text wide at the narrowest width (a distribution of 13 to 25
  // values, not a 90-day trend; 12 px a slot): a value or a label that does not fit across its slot is written upright,
  // so that every bar keeps both; the chart grows by what they take.
  const narrowest = LABEL_WIDTHS[0].px;
  const upright = n > 12 && n * 12 <= narrowest;
  const uprightValues = upright && valuePx * n > narrowest;
  const uprightLabels = upright && labelPx * n > narrowest;
  const top = 20 + (uprightValues ? valuePx : 0);
  const bottom = uprightLabels ? labelPx + 12 : 36;
  const H = 184 + top + bottom - 20;
  const edges = !uprightLabels && edgesFor(labelPx);
  const labels = labelClasses(n, labelPx, edges);
  const values = labelClasses(n, valuePx, edgesFor(valuePx));
  const highest = c.bars.findIndex((b) => b.value === max);
  /**
   * Where a value of `px` pixels goes above bar `i`: centred on it, unless centred it would cross the
   * chart's left or right border at the narrowest width a chart is laid out for (the first and last bars of
   * a long trend, whose numbers are clipped there otherwise); then it starts at its slot's left edge, or ends
   * at its slot's right edge, inside the chart at every width.
   */
  const place = (i: number, px: number): [number, 'start' | 'middle' | 'end'] => {
    const slotPx = LABEL_WIDTHS[0].px / n;
    if ((i + 0.5) * slotPx < px / 2) return [i * slot, 'start'];
    if ((n - i - 0.5) * slotPx < px / 2) return [(i + 1) * slot, 'end'];
    return [(i + 0.5) * slot, 'middle'];
  };
  const body = c.bars.map((b, i) => {
    const h = Math.round(((H - bottom - top) * b.value) / max);
    const y = H - bottom - h;
    const mid = (i + 0.5) * slot;
    const label = htmlText(b.label);
    // A label at either edge is anchored inside the chart; the stride keeps the others clear of the borders.
    const [lx, anchor] = edges && i === 0 ? [0, 'start'] : edges && i === n - 1 ? [100, 'end'] : [mid, 'middle'];
    const [vx, vAnchor] = place(i, textPx(b.shown));
    const text = (cls: string) => `<text class="${cls}" x="${pct(vx)}" y="${y - 4}" text-anchor="${vAnchor}">${escapeHtml(b.shown)}</text>`;
    // Many bars: a value is written where there is room for it, and always on the highest bar; zeros are not.
    // Upright: a text turned a quarter, in an <svg> placed in percent (a rotation needs a point in pixels).
    const turned = (cls: string, yAt: number, anchor: 'start' | 'end', content: string) =>
      `<svg x="${pct(mid)}" y="${yAt}" overflow="visible"><text class="${cls}" transform="rotate(-90)" dy="0.35em" ` +
      `text-anchor="${anchor}">${content}</text></svg>`;
    const value = uprightValues ? turned('value', y - 4, 'start', escapeHtml(b.shown))
      : n <= 12 || i === highest ? text('value') : b.value === 0 ? '' : text(`value thin ${values[i]}`);
    const labelText = uprightLabels ? turned('label', H - bottom + 6, 'end', htmlText(axis(b)))
      : `<text class="label thin ${labels[i]}" x="${pct(lx)}" y="${H - bottom + 18}" text-anchor="${anchor}">${htmlText(axis(b))}</text>`;
    return `<g class="bar" data-label="${label}" data-value="${b.value}">` +
      `<rect x="${pct(mid - bw / 2)}" y="${y}" width="${pct(bw)}" height="${h}" fill="#4c78a8"><title>${label}: ${escapeHtml(b.shown)}` +
      `${b.note ? ` ${htmlText(b.note)}` : ''}</title></rect>${value}` +
      `${labelText}</g>`;
  }).join('');
  // Few bars are not stretched across a wide screen: about 90 px a bar, never under 360 px.
  return `<figure class="chart"><figcaption>${htmlText(c.caption)}</figcaption>` +
    `<svg id="${c.id}" class="chart" role="img" aria-label="${htmlText(c.caption)}" width="100%" height="${H}" ` +
    `style="max-width:${Math.max(360, n * 90)}px" xmlns="http://www.w3.org/2000/svg">` +
    `<line x1="0" y1="${H - bottom}" x2="100%" y2="${H - bottom}" stroke="#888"/>${body}</svg></figure>`;
}

/** Horizontal stacked bars, one group a row: its name and counts above, usage reported vs not below. */
export function svgUsageChart(c: StackChart): string {
  const rowH = 44;
  const H = c.rows.length * rowH + 28;
  const max = Math.max(1, ...c.rows.map((r) => r.reported + r.notReported));
  const body = c.rows.map((r, i) => {
    const y = i * rowH;
    const w1 = (100 * r.reported) / max, w2 = (100 * r.notReported) / max;
    const label = htmlText(r.label);
    return `<g class="usage" data-label="${label}" data-reported="${r.reported}" data-not-reported="${r.notReported}">` +
      `<text x="0" y="${y + 15}">${htmlText([...r.label].length > 40 ? [...r.label].slice(0, 39).join('') + '…' : r.label)}</text>` +
      `<text x="100%" y="${y + 15}" text-anchor="end">${fmtInt(r.reported)} of ${fmtInt(r.reported + r.notReported)} reported</text>` +
      `<rect class="reported" x="0" y="${y + 21}" width="${pct(w1)}" height="16" fill="#54a24b"><title>usage reported: ${r.reported}</title></rect>` +
      `<rect class="not-reported" x="${pct(w1)}" y="${y + 21}" width="${pct(w2)}" height="16" fill="#bab0ac"><title>usage not reported: ${r.notReported}</title></rect></g>`;
  }).join('');
  const legendY = c.rows.length * rowH + 18;
  return `<figure class="chart"><figcaption>${htmlText(c.caption)}</figcaption>` +
    `<svg id="${c.id}" class="chart" role="img" aria-label="${htmlText(c.caption)}" width="100%" height="${H}" xmlns="http://www.w3.org/2000/svg">${body}` +
    `<rect x="0" y="${legendY - 10}" width="12" height="12" fill="#54a24b"/><text x="16" y="${legendY}">usage reported</text>` +
    `<rect x="130" y="${legendY - 10}" width="12" height="12" fill="#bab0ac"/><text x="146" y="${legendY}">not reported (unknown, not 0)</text>` +
    `</svg></figure>`;
}

/**
 * Where the browser has scroll-driven animations (Chromium), the "scrolls sideways" line shows exactly
 * when the table's box has something to scroll (its scroll timeline is active only then); elsewhere it
 * shows below these widths, the table's guessed width rounded up.
 */
const FIT_WIDTHS = [480, 640, 800, 960, 1200, 1600, 2400];

/** A table in a box that scrolls sideways when the table is wider, with a line that says so then. */
export function htmlTable(t: Table): string {
  if (t.facts) {
    return `<div class="scroll"><table id="${t.id}" class="kv"><tbody>${t.rows.map(([k, v]) =>
      `<tr><th>${htmlText(k)}</th><td class="num" data-key="${htmlText(k)}">${htmlText(v)}</td></tr>`).join('')}</tbody></table></div>`;
  }
  const kind = t.columns.map((c, i) => (c.wrap ? 'prose' : i === 0 || c.left ? 'name' : 'num'));
  // Its width on the page, generously guessed (a prose column wraps at about 16 em).
  const natural = t.columns.reduce((sum, c, i) => sum + 20 + 8.5 * Math.min(kind[i] === 'prose' ? 28 : Infinity,
    Math.max([...c.header].length, ...t.rows.map((r) => [...safe(r[i])].length))), 0);
  const fit = FIT_WIDTHS.find((w) => w >= natural) ?? FIT_WIDTHS.at(-1)!;
  return `<div class="table-box"><div class="scroll fit${fit}"><table id="${t.id}"><thead><tr>` +
    t.columns.map((c) => `<th>${htmlText(c.header)}</th>`).join('') + '</tr></thead><tbody>' +
    t.rows.map((r) => `<tr>${r.map((v, i) =>
      `<td class="${[kind[i], v === UNKNOWN ? 'unknown' : ''].filter(Boolean).join(' ')}">${htmlText(v)}</td>`).join('')}</tr>`).join('') +
    `</tbody></table></div><p class="scroll-hint">↔ This table is wider than the page: scroll it sideways for all ${t.columns.length} columns.</p></div>`;
}

function htmlSection(s: Section): string {
  const parts = [`<h${s.level}>${htmlText(s.title)}</h${s.level}>`];
  if (s.chart && s.chart.bars.length > 0) parts.push(svgBarChart(s.chart));
  if (s.stack && s.stack.rows.length > 0) parts.push(svgUsageChart(s.stack));
  const empty = s.table ? s.table.rows.length === 0 : (s.chart?.bars.length ?? 0) === 0;
  if (empty && (s.empty || !s.table)) parts.push(`<p class="note" id="${s.table?.id ?? s.chart?.id ?? s.id}">${htmlText(s.empty ?? 'No data in this window.')}</p>`);
  else if (s.table) parts.push(htmlTable(s.table));
  for (const note of s.notes ?? []) parts.push(`<p class="note">${htmlText(note)}</p>`);
  return `<section id="${s.id}">${parts.join('\n')}</section>`;
}

/** The sections in order; neighbours that may stand side by side share a two-column grid on a wide page. */
function htmlSections(sections: Section[]): string {
  const out: string[] = [];
  for (let i = 0; i < sections.length;) {
    if (!sections[i].half) { out.push(htmlSection(sections[i++])); continue; }
    const group: Section[] = [];
    while (i < sections.length && sections[i].half) group.push(sections[i++]);
    out.push(`<div class="grid">${group.map(htmlSection).join('\n')}</div>`);
  }
  return out.join('\n');
}

const CSS = `
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1800px;color:#222;padding:0 16px 2em}
h1{font-size:1.5em;margin:.8em 0 .3em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}h3{font-size:1em;margin-top:1.4em}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.unknown{color:#999;font-style:italic}
td.name{white-space:nowrap}td.prose{min-width:12em;overflow-wrap:anywhere}
.kv th{font-weight:normal;color:#555}
.table-box{container-type:inline-size;timeline-scope:--cut}
.scroll{overflow-x:auto;max-width:100%;scroll-timeline:--cut inline;
  background:linear-gradient(to right,#fff 30%,#fff0) left/40px 100% no-repeat local,
    linear-gradient(to left,#fff 30%,#fff0) right/40px 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%,#0003,#0000) left/14px 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%,#0003,#0000) right/14px 100% no-repeat scroll}
.scroll-hint{display:none;margin:.2em 0 .8em;color:#555;font-size:.9em}
@supports (animation-timeline:scroll()){
  .scroll-hint{display:block;visibility:hidden;height:0;margin:0;animation:cut-cue linear both;animation-timeline:--cut}
  @keyframes cut-cue{from,to{visibility:visible;height:auto;margin:.2em 0 .8em}}
}
@supports not (animation-timeline:scroll()){
${FIT_WIDTHS.map((w) => `@container (max-width:${w}px){.fit${w}+.scroll-hint{display:block}}`).join('\n')}
}
figure.chart{margin:1em 0;min-width:0;container-type:inline-size}figcaption{font-weight:600;margin-bottom:.3em}
svg.chart{display:block;width:100%;overflow:visible}
svg text{font:${FONT_PX}px system-ui,sans-serif;fill:#333}
svg text.thin{display:none}svg text.thin.w0{display:inline}
${LABEL_WIDTHS.slice(1).map((w, j) => `@container (min-width:${w.px}px){svg text.thin.${LABEL_WIDTHS[j].cls}{display:none}svg text.thin.${w.cls}{display:inline}}`).join('\n')}
.note{color:#666}.status{font-weight:600}
.grid{display:grid;grid-template-columns:minmax(0,1fr);gap:0 32px}
@media (min-width:900px){.grid{grid-template-columns:minmax(0,1fr) minmax(0,1fr)}}
.banner{padding:.8em 1em;border-radius:6px;margin:1em 0;font-size:1.05em}
.banner.alarm{background:#b3261e;color:#fff}.banner.warn{background:#f9a825;color:#1a1a1a}
dl.meta{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px;margin:.5em 0}
dl.meta dt{color:#555}dl.meta dd{margin:0;overflow-wrap:anywhere}dl.meta dd#span{overflow-wrap:normal}.stamp{white-space:nowrap}
`;

/** Escaped text with each timestamp in it kept on one line: a narrow page breaks the span between them, never inside one. */
const unbroken = (escaped: string) => escaped.replace(/\d{4}-\d{2}-\d{2}(T[\d:.]+Z?)?/g, '<span class="stamp">$&</span>');

export function renderHtml(r: Report, generatedAt = new Date().toISOString()): string {
  const doc = describeReport(r, generatedAt);
  const h = doc.health;
  const banner = h.alarm ? `<div id="status-banner" class="banner ${h.alarm.tone}" role="alert">${htmlText(h.alarm.text)}</div>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${htmlText(`${doc.title}: ${r.database.database} / ${r.schema}`)}</title>
<style>${CSS}</style></head><body>
<h1>${htmlText(doc.title)}</h1>
${banner}
<dl class="meta" id="identity">
<dt>database</dt><dd id="where">${htmlText(doc.where)}</dd>
<dt>time span</dt><dd id="span">${unbroken(htmlText(doc.span))}</dd>
<dt>generated</dt><dd id="generated">${htmlText(doc.generated)}</dd>
<dt>health</dt><dd><span id="health-status" class="status">${htmlText(h.status)}</span> (shortfall ${htmlText(h.shortfall)}, excess ${htmlText(h.excess)}; not windowed)</dd>
</dl>
<p id="summary">${htmlText(doc.summary)}</p>
<p class="note">${htmlText(doc.unknownNote)}</p>
${htmlSections(doc.sections)}
</body></html>
`;
}
