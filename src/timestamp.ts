// kandev keeps created_at and updated_at as `timestamp` (no time zone) holding UTC wall-clock time;
// this is the text PostgreSQL prints for one, and what the model, the benchmarks and the report's
// window bounds write: '2026-08-12 09:00:00.000'.
export function utcTimestamp(at: number | Date = Date.now()): string {
  return new Date(at).toISOString().replace('T', ' ').replace('Z', '');
}
