// The report's window: --since and --until as UTC timestamps for the queries' $1 and $2.
import { UserError } from '../db.js';
import { safe } from '../output.js';
import { utcTimestamp } from '../timestamp.js';

/** The time window (UTC, as the table stores times): since inclusive, until exclusive, null = open. */
export interface ReportWindow { since: string | null; until: string | null }

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

/** One sentence when the window starts after now (so an empty report is no surprise), else null. */
export function futureWindowWarning(window: ReportWindow, now = new Date()): string | null {
  if (window.since === null || window.since <= utcTimestamp(now.getTime())) return null;
  return `warning: --since ${window.since.replace(/\.000$/, '')} UTC is in the future, so the window holds nothing yet.`;
}
