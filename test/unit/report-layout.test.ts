// The terminal report's layout engine and formatting (src/report/layout.ts, format.ts): pure functions,
// no database.
import { describe, it, expect } from 'vitest';
import { barChart, clip, table, wrap } from '../../src/report/layout.js';
import { count, depthLabel, fmtAge, fmtDec, fmtDuration, fmtInt, fmtSeconds } from '../../src/report/format.js';

const widest = (text: string) => Math.max(...text.split('\n').map((l) => [...l].length));

describe('formatting', () => {
  it('writes unknown for NULL, never 0', () => {
    for (const f of [fmtInt, fmtDec, fmtDuration, fmtSeconds]) expect(f(null)).toBe('unknown');
    expect(fmtInt(0)).toBe('0');
    expect(fmtInt(1234567.4)).toBe('1,234,567');
    expect(fmtDec(2)).toBe('2.00');
    expect(fmtSeconds(9)).toBe('9.0 s');
  });

  it('durations and ages as an operator reads them', () => {
    expect(fmtDuration(2000)).toBe('2.0 s');
    expect(fmtDuration(194_000)).toBe('3m 14s');
    expect([-1, 30, 600, 11_520, 200_000].map(fmtAge)).toEqual(['in the future', '30 s', '10 min', '3.2 h', '2.3 d']);
  });

  it('counts agree with their noun; depths are named', () => {
    expect([count(1, 'turn'), count(2, 'turn'), count(null, 'turn')]).toEqual(['1 turn', '2 turns', 'unknown turns']);
    expect([0, 2, null].map(depthLabel)).toEqual(['launched by the agent', 'nested, depth 2', 'parent not captured']);
  });
});

describe('text layout', () => {
  it('clips with an ellipsis and wraps words to the width', () => {
    expect(clip('abcdef', 4)).toBe('abc…');
    expect(clip('abc', 4)).toBe('abc');
    const text = wrap('one two three four five six seven eight nine ten', 20);
    expect(widest(text)).toBeLessThanOrEqual(20);
    expect(text.split('\n').every((l) => l.startsWith('  '))).toBe(true);
    expect(text.replace(/\s+/g, ' ').trim()).toBe('one two three four five six seven eight nine ten');
  });

  it('a table fits its width: the first column clipped, columns of highest priority left out and named', () => {
    const rows = [['a rather long name of a subagent type', '1,000', '2', '3'], ['short', '5', '6', '7']];
    const columns = [{ header: 'type' }, { header: 'subagents', priority: 1 }, { header: 'async', priority: 3 }, { header: 'tokens', priority: 2 }];
    const wide = table(columns, rows, undefined, 200);
    expect(wide).toMatch(/^ {2}a rather long name of a subagent type +1,000 +2 +3$/m);
    expect(wide).not.toContain('not shown');
    const narrow = table(columns, rows, undefined, 40);
    expect(widest(narrow)).toBeLessThanOrEqual(40);
    expect(narrow).toMatch(/^ {2}a rather long name… +1,000 +3$/m);
    expect(narrow.replace(/\n\s*/g, ' ')).toContain('(not shown at 40 columns: async; see --width or --json)');
  });

  it('a bar chart scales to the largest value and fits its width', () => {
    const chart = barChart([{ label: 'x', value: 4, shown: '4' }, { label: 'y', value: 1, shown: '1', note: '(one)' }, { label: 'z', value: 0, shown: '0' }], undefined, 40);
    expect(chart.split('\n')).toEqual([`  x │${'█'.repeat(20)} 4`, `  y │${'█'.repeat(5)} 1 (one)`, '  z │ 0']);
    expect(barChart([], undefined, 40)).toBe('  (no data)');
  });
});
