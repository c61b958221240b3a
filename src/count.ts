// How a count is written for a reader, on every surface (health, backfill, progress, the report, the demo):
// 282,000. --json and the metrics keep the bare number, for machines.
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
