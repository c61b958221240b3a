// The report's sections, described once and drawn by the terminal and the page (src/report/sections.ts,
// terminal.ts, html.ts, json.ts), on the fixture's report as `report --json` gives it: no database.
import { describe, it, expect } from 'vitest';
import type { Report } from '../../src/report/index.js';
import { describeReport } from '../../src/report/sections.js';
import { renderText } from '../../src/report/terminal.js';
import { renderHtml, labelClasses } from '../../src/report/html.js';
import { reportJson } from '../../src/report/json.js';
import { statementTimeout } from '../../src/report/read.js';
import { sampleReport } from '../helpers/report-fixture.js';

const report = sampleReport() as Report;
const decode = (s: string) => s.replaceAll('&amp;', '&').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#39;', "'");

describe('the per-day trend on the terminal', () => {
  const day = (d: string, subagents: number) => ({ day: d, subagents, async: 0, sessions: subagents ? 1 : 0, total_tokens: null });
  it('writes a single day without subagents as "none", and a run of them as one line', () => {
    const trend = [day('2099-01-01', 2), day('2099-01-02', 0), day('2099-01-03', 1), day('2099-01-04', 0), day('2099-01-05', 0), day('2099-01-06', 4)];
    const text = renderText({ ...report, trend_per_day: trend } as Report, undefined, 80);
    expect(text.match(/^ {2}2099-\d\d-\d\d │.*$/gm)).toEqual([
      '  2099-01-01 │████████████████████ 2 (0 async)',
      '  2099-01-02 │ none',
      '  2099-01-03 │██████████ 1 (0 async)',
      '  2099-01-04 │ none through 2099-01-05 (2 days)',
      '  2099-01-06 │████████████████████████████████████████ 4 (0 async)',
    ]);
  });
});

describe('one description, two renderers', () => {
  const doc = describeReport(report, '2026-12-04T12:00:00Z');
  const text = renderText(report, undefined, 1000);
  const html = decode(renderHtml(report, '2026-12-04T12:00:00Z'));

  it('every section title, figure label and column header appears in both the terminal and the page', () => {
    for (const s of doc.sections) {
      expect(text, s.title).toContain(s.title);
      expect(html, s.title).toContain(s.title);
      for (const c of s.table?.columns ?? []) { expect(text).toContain(c.header); expect(html).toContain(c.header); }
      if (s.table?.facts) for (const [label, value] of s.table.rows) {
        expect(text).toMatch(new RegExp(`^ {2}${label.replace(/[()+]/g, '\\$&')} +${value}$`, 'm'));
        expect(html).toContain(`<th>${label}</th><td class="num" data-key="${label}">${value}</td>`);
      }
    }
    expect(text).toContain(doc.summary);
    expect(html).toContain(doc.summary);
  });

  it('the trend names the days it shows, the same in both', () => {
    expect(doc.sections.find((s) => s.id === 'trend')!.title).toBe('Subagents per day (UTC), 2098-10-04 to 2099-01-01');
    expect(text).toContain('see earlier days with --until 2098-10-04.');
    expect(html).toContain('see earlier days with --until 2098-10-04.');
    // The page draws every one of its 90 days, an axis; the terminal writes the days with subagents and
    // one line for each run of days without any.
    expect(html.match(/<g class="bar" data-label="209\d-\d\d-\d\d"/g)).toHaveLength(90);
    expect(text.match(/^ {2}209\d-\d\d-\d\d │.*$/gm)).toEqual([
      '  2098-10-04 │ none through 2098-12-31 (89 days)',
      `  2099-01-01 │${'█'.repeat(500)} 7 (3 async, 1,500 tokens)`,
    ]);
  });

  it('the still-running table has a heading on the page', () => {
    expect(html).toMatch(/<section id="running-section"><h3>Still running, oldest first<\/h3>/);
  });
});

describe('hostile text', () => {
  const hostile = 'x\u001b[31mRED\u0007 \u202emirror\u202c \u009b2J \u2028line';
  const r = { ...report, by_model: [{ ...report.by_model[0], model: hostile }] } as Report;

  it('--json writes control and bidi characters as \\u escapes: the same value, no raw character', () => {
    const json = reportJson(r);
    expect(json).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2028\u2029]/);
    expect(json).toContain('\\u001b[31mRED\\u0007 \\u202emirror\\u202c \\u009b2J \\u2028line');
    expect(JSON.parse(json).by_model[0].model).toBe(hostile);
    expect(JSON.parse(json)).toEqual(JSON.parse(JSON.stringify(r)));
    // Other text outside ASCII stays as it is.
    expect(reportJson({ ...r, schema: 'kandev é 日本' })).toContain('"schema": "kandev é 日本"');
  });

  it('the page shows them escaped, as the terminal does', () => {
    const html = renderHtml(r);
    expect(html).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2028\u2029]/);
    expect(html).toContain('x\\x1b[31mRED\\x07 \\u202emirror\\u202c \\x9b2J \\u2028line');
    expect(renderText(r, undefined, 1000)).toContain('x\\x1b[31mRED\\x07 \\u202emirror\\u202c \\x9b2J \\u2028line');
  });
});

describe('chart labels', () => {
  it('thins labels to the room each width gives, keeping the first and last at the edges', () => {
    const classes = labelClasses(90, 84, true);
    const at = (cls: string) => classes.flatMap((c, i) => (c.split(' ').includes(cls) ? [i] : []));
    expect(at('w0')).toEqual([0, 89]);
    const wide = at('w2');
    expect(wide[0]).toBe(0);
    expect(wide.at(-1)).toBe(89);
    // Labels of 84 px never closer than that at 1100 px (90 slots of 12.2 px), edges counting a whole label.
    for (let i = 1; i < wide.length; i++) expect((wide[i] - wide[i - 1]) * (1100 / 90)).toBeGreaterThanOrEqual(84);
    expect(labelClasses(3, 80)).toEqual(['w0 w1 w2', 'w0 w1 w2', 'w0 w1 w2']);
  });
});

describe('statement timeout', () => {
  it('--statement-timeout wins; else the session\'s own; else 5 minutes', () => {
    expect(statementTimeout('30s', '0')).toBe('30s');
    expect(statementTimeout('0', '1min')).toBe('0');
    expect(statementTimeout(undefined, '1min')).toBeNull();
    expect(statementTimeout(undefined, '0')).toBe('5min');
    expect(() => statementTimeout('soon', '0')).toThrow('--statement-timeout must be a duration like 30s, 5min or 1h (0 for none), got "soon".');
  });
});
