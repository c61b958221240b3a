// The report's window: --since and --until as UTC timestamps for the queries' $1 and $2.
import { UserError } from '../errors.js';
import { safe } from '../output.js';
import { utcTimestamp } from '../timestamp.js';

/**
 * The time window (UTC, as the table stores times): since inclusive, until exclusive, null = open. The
 * bounds are text for SQL; `sinceAt` is --since as an instant (ms since the epoch), for comparing.
 */
export interface ReportWindow { since: string | null; until: string | null; sinceAt?: number | null }

const UNITS: Record<string, number> = { m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** The earliest instant PostgreSQL's timestamp holds: 4713-11-24 BC (astronomical year -4712). */
const EARLIEST = Date.UTC(-4712, 10, 24);

/** UTC midnight of a calendar day, or NaN when there is no such day (2026-02-30). Years 0-99 as written. */
function utcDay(year: number, month: number, day: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  return d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day ? d.getTime() : NaN;
}

/**
 * One --since/--until value as an instant (ms since the epoch). A date alone (0001-01-01 to 9999-12-31) is
 * UTC midnight; as --until it means the end of that day (the whole day is included). A date and time is
 * UTC unless it carries Z or an offset. `now` is now; a time ago is 30m, 12h, 7d or 2w (or -7d).
 */
function whenAt(flag: 'since' | 'until', value: string, now: Date): number {
  const v = value.trim();
  const ago = /^-?(\d{1,6})\s*(m|min|h|d|w)$/.exec(v);
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(v);
  const stamp = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$/i.exec(v);
  if (ago) return now.getTime() - Number(ago[1]) * UNITS[ago[2]!]!;
  if (v === 'now') return now.getTime();
  const [, y, mo, d] = (date ?? stamp ?? []) as string[];
  if (!y || Number(y) < 1) return NaN;
  const day = utcDay(Number(y), Number(mo), Number(d));
  if (date) return flag === 'until' ? day + UNITS.d! : day;
  if (!stamp || Number.isNaN(day) || Number(stamp[4]) > 23 || Number(stamp[5]) > 59 || Number(stamp[6] ?? 0) > 59) return NaN;
  // Date.parse reads an ISO date and time with a four-digit year and an offset exactly.
  return Date.parse(`${v.replace(' ', 'T')}${stamp[7] ? '' : 'Z'}`.replace(/([+-]\d{2})(\d{2})$/, '$1:$2'));
}

/** One --since/--until value as a UTC timestamp for SQL ('YYYY-MM-DD HH:MM:SS.mmm', PostgreSQL's spelling past 9999 or before year 1). */
export function parseWhen(flag: 'since' | 'until', value: string, now = new Date()): string {
  const t = whenAt(flag, value, now);
  if (!Number.isFinite(t)) {
    throw new UserError(`--${flag} must be a date from 0001-01-01 to 9999-12-31 (2026-08-01), a date and time in UTC ` +
      `(2026-08-01T09:30, or with Z or an offset like +02:00), now, or a time ago like 30m, 12h, 7d or 2w; got "${safe(value)}".`);
  }
  if (t < EARLIEST) {
    throw new UserError(`--${flag} ${safe(value)} reaches back before 4713 BC, the earliest time PostgreSQL holds: ` +
      'give a shorter time ago, or a date.');
  }
  return utcTimestamp(t);
}

export function parseWindow(since: string | undefined, until: string | undefined, now = new Date()): ReportWindow {
  const w = { since: since === undefined ? null : parseWhen('since', since, now), until: until === undefined ? null : parseWhen('until', until, now),
    sinceAt: since === undefined ? null : whenAt('since', since, now) };
  if (since !== undefined && until !== undefined && w.sinceAt! >= whenAt('until', until, now)) {
    throw new UserError(`--since (${w.since} UTC) must be before --until (${w.until} UTC): nothing lies between them.`);
  }
  return w;
}

/** One sentence when the window starts after now (so an empty report is no surprise), else null. */
export function futureWindowWarning(window: ReportWindow, now = new Date()): string | null {
  if (window.since === null || (window.sinceAt ?? -Infinity) <= now.getTime()) return null;
  return `warning: --since ${window.since.replace(/\.000$/, '')} UTC is in the future, so the window holds nothing yet.`;
}
