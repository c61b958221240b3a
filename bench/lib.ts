// Small helpers for the benchmarks: timing, medians and spreads, paired ratios, and the message
// shapes that the cases write (SPEC §1 traffic shape).
import { randomUUID } from 'node:crypto';

export const QUICK = process.env.BENCH_QUICK === '1';

export function now(): number {
  return Number(process.hrtime.bigint()) / 1e6; // milliseconds
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Median and spread (min, max) of a sample. */
export function summary(xs: number[]) {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}

/**
 * The ratio of two variants measured side by side: the median of the per-round ratios (each round ran
 * both variants back to back, so drift in a shared CPU cancels), with their spread.
 */
export function pairedRatio(a: number[], b: number[]) {
  const r = a.map((x, i) => x / b[i]);
  return { ...summary(r), ratioOfMedians: median(a) / median(b) };
}

/** Variant order for round r: alternate, and reverse every other round so neither always goes first. */
export function order<T>(variants: T[], round: number): T[] {
  return round % 2 === 0 ? [...variants] : [...variants].reverse();
}

export function fmt(x: number, digits = 3): string {
  if (!Number.isFinite(x)) return String(x);
  return x.toFixed(digits);
}

let seq = 0;
export function uid(prefix: string): string {
  return `${prefix}-${process.pid}-${++seq}`;
}

const PROMPT = 'Review the diff in the current branch for security problems: injection, missing authorization, '
  + 'secrets in code, unsafe deserialization. Report each finding with file, line and a suggested fix. '
  + 'Ignore style. Be concise; the parent agent merges reports from several reviewers. ';

export interface SubagentCall {
  toolCallId: string;
  subagentType: string;
  description: string;
}

export interface Frame {
  metadata: string;
  /** What an application that writes its own row knows about this frame (SPEC §4 derivation). */
  values: {
    tool_status: string; agent_status: string | null; agent_id: string | null; model: string | null;
    is_async: number; total_tokens: number | null; tool_use_count: number | null; duration_ms: number | null;
    child_session_id: string | null;
  };
}

export const TERMINAL = new Set(['complete', 'completed', 'success', 'error', 'failed', 'cancelled']);

/**
 * The frames of one subagent call: a launch (INSERT) then `updates` later frames (UPDATEs), the way
 * kandev rewrites the whole metadata on each. 3/4 of calls are Claude background dispatches
 * (async_launched, no usage); the rest complete with usage.
 */
export function subagentFrames(call: SubagentCall, updates: number, variant: number): Frame[] {
  const async = variant % 4 !== 0;
  const frames: Frame[] = [];
  const mk = (status: string, st: Record<string, unknown>, v: Frame['values']): Frame => ({
    metadata: JSON.stringify({
      tool_call_id: call.toolCallId, title: 'Task', status,
      normalized: { kind: 'subagent_task', subagent_task: {
        description: call.description, prompt: PROMPT, subagent_type: call.subagentType, ...st } },
    }),
    values: v,
  });
  const base = { agent_status: null, agent_id: null, model: null, is_async: 0, total_tokens: null,
    tool_use_count: null, duration_ms: null, child_session_id: null };
  frames.push(mk('pending', {}, { ...base, tool_status: 'pending' }));
  for (let u = 1; u <= updates; u++) {
    const last = u === updates;
    if (async) {
      const status = last ? 'completed' : 'in_progress';
      frames.push(mk(status, { status: 'async_launched', agent_id: 'a1b2c3d4', is_async: true },
        { ...base, tool_status: status, agent_status: 'async_launched', agent_id: 'a1b2c3d4', is_async: 1 }));
    } else if (!last) {
      frames.push(mk('in_progress', { status: 'running', agent_id: 'a1b2c3d4' },
        { ...base, tool_status: 'in_progress', agent_status: 'running', agent_id: 'a1b2c3d4' }));
    } else {
      frames.push(mk('completed', { status: 'completed', agent_id: 'a1b2c3d4', model: 'claude-opus-5[1m]',
        total_tokens: 48211, tool_use_count: 7, duration_ms: 91234, result_text: 'No findings. '.repeat(20) },
      { ...base, tool_status: 'completed', agent_status: 'completed', agent_id: 'a1b2c3d4',
        model: 'claude-opus-5[1m]', total_tokens: 48211, tool_use_count: 7, duration_ms: 91234 }));
    }
  }
  return frames;
}

/** Metadata of a tool call of another kind (a shell command), before and after it ran. */
export function shellFrames(toolCallId: string): string[] {
  const doc = (status: string, output?: string) => JSON.stringify({
    tool_call_id: toolCallId, title: 'Bash', status,
    normalized: { kind: 'shell_exec', shell_exec: { command: 'npm test -- --run test/merge-rules.test.ts',
      description: 'run the merge tests', ...(output ? { output } : {}) } },
  });
  return [doc('pending'), doc('in_progress'), doc('completed', 'ok 12 tests passed\n'.repeat(8))];
}

export function newCall(i: number): SubagentCall {
  const types = ['security-reviewer', 'test-writer', 'explorer', 'general-purpose'];
  return { toolCallId: `toolu_01${randomUUID().replaceAll('-', '').slice(0, 22)}`,
    subagentType: types[i % types.length], description: `subagent task ${i}` };
}

export function ts(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
}
