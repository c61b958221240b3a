// kandev keeps created_at and updated_at as `timestamp` (no time zone) holding UTC wall-clock time;
// this is the text PostgreSQL prints for one, and what the model, the benchmarks and the report's
// window bounds write: '2026-08-12 09:00:00.000'. A year past 9999 is written out (10000-01-01 …) and one
// before year 1 as PostgreSQL writes it (0100-01-01 … BC: there is no year 0), not as JavaScript's
// ISO form (+010000-01-01), which PostgreSQL reads as a time zone.
export function utcTimestamp(at: number | Date = Date.now()): string {
  const d = new Date(at);
  const year = d.getUTCFullYear();
  const rest = d.toISOString().replace(/^[+-]?\d+/, '').replace('T', ' ').replace('Z', '');
  if (year >= 1) return `${String(year).padStart(4, '0')}${rest}`;
  return `${String(1 - year).padStart(4, '0')}${rest} BC`;
}
