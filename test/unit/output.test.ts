// The terminal rules every command's output goes by (src/output.ts): how wide it may be, and that text
// from the database or an agent reaches the terminal with its control characters shown, never obeyed.
import { describe, expect, it } from 'vitest';
import { keyValues, safe, safeLines, terminalWidth } from '../../src/output.js';
import { UserError } from '../../src/errors.js';

describe('terminalWidth', () => {
  const pipe = { isTTY: false };
  it('takes --width first, then the terminal, then $COLUMNS, then 80', () => {
    expect(terminalWidth('120', { COLUMNS: '90' }, { isTTY: true, columns: 100 })).toBe(120);
    expect(terminalWidth(undefined, { COLUMNS: '90' }, { isTTY: true, columns: 100 })).toBe(100);
    expect(terminalWidth(undefined, { COLUMNS: '90' }, pipe)).toBe(90);
    expect(terminalWidth(undefined, {}, pipe)).toBe(80);
  });

  it('never goes below 40 columns, whatever the terminal or $COLUMNS says', () => {
    expect(terminalWidth(undefined, {}, { isTTY: true, columns: 20 })).toBe(40);
    expect(terminalWidth(undefined, { COLUMNS: '10' }, pipe)).toBe(40);
  });

  it('ignores a $COLUMNS that is no positive whole number', () => {
    for (const COLUMNS of ['', 'wide', '-5', '0', '12.5']) expect(terminalWidth(undefined, { COLUMNS }, pipe), COLUMNS).toBe(80);
  });

  it('refuses a --width outside 40..1000 or not a whole number, as a usage error that shows it safely', () => {
    for (const bad of ['39', '1001', '80.5', '1e2', '', 'abc', '-80']) {
      expect(() => terminalWidth(bad, {}, pipe), bad).toThrow(UserError);
    }
    expect(() => terminalWidth('\u001b[2J', {}, pipe)).toThrow('got "\\x1b[2J"');
    expect(terminalWidth('40', {}, pipe)).toBe(40);
    expect(terminalWidth('1000', {}, pipe)).toBe(1000);
  });
});

describe('safe', () => {
  it('shows every C0, DEL and C1 control character as a visible escape', () => {
    expect(safe('a\u001b[31mb\u0007c\u007f\u009b2J')).toBe('a\\x1b[31mb\\x07c\\x7f\\x9b2J');
    expect(safe('line\nnext\ttab\rback')).toBe('line\\nnext\\ttab\\rback');
    for (let code = 0; code < 0xa0; code++) {
      if (code >= 0x20 && code < 0x7f) continue;
      expect(safe(String.fromCharCode(code)), `U+${code.toString(16)}`).toMatch(/^\\[xntr]/);
    }
  });

  it('shows bidi overrides, isolates and line separators, which reorder or break what the operator reads', () => {
    expect(safe('abc\u202edcba')).toBe('abc\\u202edcba');
    for (const c of ['\u061c', '\u200e', '\u200f', '\u2028', '\u2029', '\u202a', '\u2066', '\u2069']) {
      expect(safe(c)).toBe(`\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    }
  });

  it('leaves printable text alone, backslashes and other scripts included', () => {
    const text = 'C:\\path, naïve 日本語 😀 — "quoted" <tag>';
    expect(safe(text)).toBe(text);
  });

  it('safeLines keeps the newlines of a multi-line message and escapes the rest', () => {
    expect(safeLines('first\u001b[2J\nsecond\r')).toBe('first\\x1b[2J\nsecond\\r');
  });
});

describe('keyValues', () => {
  it('aligns the values after the longest label', () => {
    expect(keyValues([['status', 'ok'], ['rows', '12']])).toBe('  status  ok\n  rows    12');
  });
});
