import { progress, type ProgressOptions } from './progress.js';
export { formatCount } from './count.js';
import { UserError } from './errors.js';

// Terminal output: colour only on a TTY and never with NO_COLOR (https://no-color.org).
export const useColor = Boolean(process.stdout.isTTY) && !('NO_COLOR' in process.env && process.env.NO_COLOR !== '');

const paint = (code: number) => (s: string) => (useColor ? `\x1b[${code}m${s}\x1b[0m` : s);
export const bold = paint(1);
export const red = paint(31);
export const green = paint(32);
export const yellow = paint(33);
export const dim = paint(2);

/**
 * How many columns terminal output may use: --width, else the terminal's own width (stdout on a TTY),
 * else $COLUMNS, else 80. A bad --width is a usage error; a bad $COLUMNS is ignored.
 */
export function terminalWidth(flag: string | undefined, env = process.env, stdout: { isTTY?: boolean; columns?: number } = process.stdout): number {
  if (flag !== undefined) {
    const n = Number(flag);
    if (!/^\d+$/.test(flag.trim()) || n < 40 || n > 1000) {
      throw new UserError(`--width must be a whole number of columns from 40 to 1000, got "${safe(flag)}".`);
    }
    return n;
  }
  if (stdout.isTTY && stdout.columns && stdout.columns > 0) return Math.max(40, stdout.columns);
  const columns = Number(env.COLUMNS);
  if (Number.isInteger(columns) && columns > 0) return Math.max(40, columns);
  return 80;
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** Left-aligned "label  value" lines. */
export function keyValues(rows: Array<[string, string]>): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n');
}

/**
 * Text that came from messages or the database (types, models, descriptions, titles, ids, error
 * messages), made safe for a terminal: every control character (C0, DEL, C1: ESC, BEL, CR, the
 * 8-bit CSI, ...) and every Unicode bidi override, isolate and line separator is shown as a visible
 * escape (\x1b, \u202e) instead of reaching the terminal, where it could recolour, retitle or clear
 * it, or reorder what the operator reads. A backslash is not doubled: the text stays readable.
 */
export function safe(text: string): string {
  // eslint-disable-next-line no-control-regex -- matching control characters is what this function is for
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g, (c) => {
    const code = c.charCodeAt(0);
    if (c === '\n') return '\\n';
    if (c === '\t') return '\\t';
    if (c === '\r') return '\\r';
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * `safe()` for text that may span lines on purpose (a multi-line error): keeps the newlines, and a line's
 * leading tabs as its indentation (libpq and PostgreSQL indent a message's second line with one: "\n\tIs
 * the server running"). Every other control character is shown escaped, as by safe().
 */
export function safeLines(text: string): string {
  return text.split('\n').map((line) => {
    const indent = /^\t*/.exec(line)![0];
    return '  '.repeat(indent.length) + safe(line.slice(indent.length));
  }).join('\n');
}

export type { Progress } from './progress.js';

/** A progress line on stderr for one step, with coloured marks on a terminal. */
export function step(label: string, opts: Omit<ProgressOptions, 'mark'> = {}) {
  return progress(label, { ...opts, mark: { ok: green, failed: red } });
}
