// How the report writes a value, for every renderer: NULL is "unknown" (not reported), never 0.
import type { Num } from './model.js';
import { formatCount } from '../count.js';

export const UNKNOWN = 'unknown';

export function fmtInt(v: Num): string {
  if (v === null || v === undefined) return UNKNOWN;
  return formatCount(v);
}

export function fmtDec(v: Num, digits = 2): string {
  if (v === null || v === undefined) return UNKNOWN;
  return v.toFixed(digits);
}

/** Seconds with one decimal and their unit ("9.0 s"), or unknown. */
export function fmtSeconds(v: Num): string {
  return v === null || v === undefined ? UNKNOWN : `${v.toFixed(1)} s`;
}

export function fmtDuration(ms: Num): string {
  if (ms === null || ms === undefined) return UNKNOWN;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m}m ${String(Math.round(s - m * 60)).padStart(2, '0')}s`;
}

/** How long ago, coarse: an operator reads "3.2 h", not 11,520 s. Negative = the server's clock is behind. */
export function fmtAge(seconds: number): string {
  if (seconds < 0) return 'in the future';
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

/** "1 turn", "2 turns": counts in prose agree with their noun. */
export function count(n: Num, one: string, many = `${one}s`): string {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}

export function depthLabel(depth: number | null): string {
  if (depth === null) return 'parent not captured';
  if (depth === 0) return 'launched by the agent';
  return `nested, depth ${depth}`;
}

/** A card by its title, else its id (a host without titles). */
export const cardLabel = (r: { title: string | null; task_id: string }) => r.title ?? r.task_id;
