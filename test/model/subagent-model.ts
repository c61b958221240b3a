// The one reference model of capture in the tests, written from docs/decisions.md#derivation (derivation), §5 (execution id),
// §6 (merge) and docs/decisions.md, deliberately NOT from the SQL. test/capture/differential.test.ts and
// test/capture/hostile-input.test.ts feed the same message writes to this model and to the real trigger and
// require identical rows and stats.
//
// Documents are `Json` trees in which numbers keep their exact lexeme (1.5, 2.0, 1e2,
// 9223372036854775808). The differential generator builds trees and `jsonText()` writes them; the
// hostile corpus is text, read into a tree by `parseMetadata()`. Either way the model reasons about
// exactly what was written, with no JSON.parse precision loss.
import { isTerminalToolStatus } from '../../kandev/terminal-statuses.js';
import type { SubagentColumn } from './subagent-table.js';
import type { SubagentRow } from '../../kandev/subagent-row.js';

// ---------------------------------------------------------------------------------------------------
// Documents

/** A JSON value as written. Object entries are a list: a key may repeat (jsonb keeps the last one). */
export type Json =
  | { t: 'null' }
  | { t: 'bool'; v: boolean }
  | { t: 'num'; lex: string }
  | { t: 'str'; v: string; escapeAll?: boolean } // escapeAll: every character written as \uXXXX
  | { t: 'arr'; items: Json[] }
  | { t: 'obj'; entries: [string, Json][]; escapeKeys?: boolean };

/** The metadata column after a write: a JSON document, or text that is not JSON at all (or SQL NULL). */
/** A document (with the text it was read from, when it was read from text), or text that is not JSON. */
export type Metadata = { json: Json; text?: string } | { notJson: string | null };

export const J = {
  null: { t: 'null' } as Json,
  bool: (v: boolean): Json => ({ t: 'bool', v }),
  num: (lex: string): Json => ({ t: 'num', lex }),
  str: (v: string, escapeAll = false): Json => (escapeAll ? { t: 'str', v, escapeAll } : { t: 'str', v }),
  arr: (...items: Json[]): Json => ({ t: 'arr', items }),
  obj: (entries: [string, Json][], escapeKeys = false): Json => (escapeKeys ? { t: 'obj', entries, escapeKeys } : { t: 'obj', entries }),
};

/** A JSON string literal; escapeAll writes every UTF-16 unit as \uXXXX (so "tool_call_id" can hide). */
function stringText(v: string, escapeAll = false): string {
  if (!escapeAll) return JSON.stringify(v);
  return '"' + v.split('').map((c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')).join('') + '"';
}

/** The text a writer stores for a document. */
export function jsonText(v: Json): string {
  switch (v.t) {
    case 'null': return 'null';
    case 'bool': return String(v.v);
    case 'num': return v.lex;
    case 'str': return stringText(v.v, v.escapeAll);
    case 'arr': return '[' + v.items.map(jsonText).join(',') + ']';
    case 'obj': return '{' + v.entries.map(([k, e]) => stringText(k, v.escapeKeys) + ':' + jsonText(e)).join(',') + '}';
  }
}

export function metadataText(m: Metadata): string | null {
  return 'json' in m ? m.text ?? jsonText(m.json) : m.notJson;
}

/** Marks a number lexeme while JSON.parse reads the rest (a character no corpus document holds). */
const NUMBER_MARK = '\u0001#';

/**
 * Reads stored metadata text into a document, keeping every number's lexeme (JSON.parse alone would
 * round 9223372036854775807). Text that is not JSON (as JSON.parse, and so PostgreSQL, reads it) is
 * `notJson`. A repeated key keeps its last value, as jsonb does.
 */
export function parseMetadata(text: string | null): Metadata {
  if (text === null) return { notJson: null };
  if (text.includes('\u0001') || /\\u0001/i.test(text)) throw new Error('parseMetadata: U+0001 is its number mark');
  let marked = '';
  let inString = false;
  const number = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      marked += ch;
      if (ch === '\\') marked += text[++i] ?? '';
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
      marked += ch;
    } else if (ch === '-' || (ch >= '0' && ch <= '9')) {
      number.lastIndex = i;
      const m = number.exec(text);
      if (!m) { marked += ch; continue; }
      marked += JSON.stringify(NUMBER_MARK + m[0]);
      i += m[0].length - 1;
    } else {
      marked += ch;
    }
  }
  let raw: unknown;
  try { raw = JSON.parse(marked); } catch { return { notJson: text }; }
  // Built without recursion: documents nest thousands of levels deep.
  const root: { value?: Json } = {};
  const todo: Array<{ raw: unknown; put: (v: Json) => void }> = [{ raw, put: (v) => { root.value = v; } }];
  while (todo.length > 0) {
    const { raw: r, put } = todo.pop()!;
    if (r === null) put(J.null);
    else if (typeof r === 'boolean') put(J.bool(r));
    else if (typeof r === 'string') put(r.startsWith(NUMBER_MARK) ? J.num(r.slice(NUMBER_MARK.length)) : J.str(r));
    else if (Array.isArray(r)) {
      const items: Json[] = new Array(r.length);
      put({ t: 'arr', items });
      r.forEach((e, i) => todo.push({ raw: e, put: (v) => { items[i] = v; } }));
    } else {
      const entries: [string, Json][] = Object.keys(r as object).map((k) => [k, J.null]);
      put({ t: 'obj', entries });
      entries.forEach((entry) => todo.push({ raw: (r as Record<string, unknown>)[entry[0]], put: (v) => { entry[1] = v; } }));
    }
  }
  return { json: root.value!, text };
}

/** Member of an object, the last one when a key repeats (as jsonb keeps it); undefined = absent. */
export function member(v: Json | undefined, key: string): Json | undefined {
  if (v?.t !== 'obj') return undefined;
  for (let i = v.entries.length - 1; i >= 0; i--) if (v.entries[i][0] === key) return v.entries[i][1];
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// Numbers, exactly as numeric holds them

interface Decimal {
  /** value = sign * mantissa * 10^exponent */
  negative: boolean;
  mantissa: bigint;
  exponent: number;
  /** digits after the decimal point that numeric keeps: 1.50 -> 2, 1e2 -> 0, 1.5e1 -> 0 */
  scale: number;
}

function decimal(lex: string): Decimal {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(lex);
  if (!m) throw new Error(`generator emitted a non-JSON number lexeme: ${lex}`);
  const frac = m[3] ?? '';
  const exponent = Number(m[4] ?? '0') - frac.length;
  return { negative: m[1] === '-', mantissa: BigInt(m[2] + frac), exponent, scale: Math.max(0, -exponent) };
}

const BIGINT_MAX = 9223372036854775807n;

/** Integer digits of |value| (for numeric's range); 0 for |value| < 1. */
function integerDigits(d: Decimal): number {
  if (d.mantissa === 0n) return 0;
  return Math.max(0, d.mantissa.toString().length + d.exponent);
}

/** decisions.md: a number beyond numeric's range makes the document unparseable as jsonb. Numeric holds
 *  up to 131072 digits before the point and 16383 after. */
function numericHolds(lex: string): boolean {
  const d = decimal(lex);
  return integerDigits(d) <= 131072 && d.scale <= 16383;
}

/** The integer value of a number with no fractional part (scale 0), else undefined. */
function integerValue(lex: string): bigint | undefined {
  const d = decimal(lex);
  if (d.scale !== 0) return undefined; // 1.5, 2.0, 100e-2 keep a fraction: not integers
  if (integerDigits(d) > 25) return d.mantissa === 0n ? 0n : d.negative ? -(BIGINT_MAX * 10n) : BIGINT_MAX * 10n;
  const magnitude = d.mantissa * 10n ** BigInt(d.exponent);
  return d.negative ? -magnitude : magnitude;
}

// ---------------------------------------------------------------------------------------------------
// Derivation (docs/decisions.md#derivation, decisions "Derivation")

/** A UTF-16 surrogate without its partner: not a character, so jsonb cannot hold it. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The SQLSTATE of a string jsonb cannot hold, else null. */
function stringRefusal(v: string): string | null {
  if (v.includes('\u0000')) return '22P05';        // unsupported Unicode escape sequence
  return LONE_SURROGATE.test(v) ? '22P02' : null;  // invalid input syntax
}

/**
 * Why `metadata::jsonb` fails, as the SQLSTATE it raises, or null when jsonb holds the document: not
 * JSON, a string jsonb cannot hold, a number beyond numeric's range. Without recursion: documents nest
 * thousands of levels deep.
 */
export function jsonbRefusal(m: Metadata): string | null {
  if (!('json' in m)) return m.notJson === null ? null : '22P02';
  const stack: Json[] = [m.json];
  while (stack.length > 0) {
    const v = stack.pop()!;
    let refusal: string | null = null;
    if (v.t === 'str') refusal = stringRefusal(v.v);
    else if (v.t === 'num') refusal = numericHolds(v.lex) ? null : '22003';  // numeric field overflow
    else if (v.t === 'arr') stack.push(...v.items);
    else if (v.t === 'obj') {
      for (const [k, e] of v.entries) {
        refusal ??= stringRefusal(k);
        stack.push(e);
      }
    }
    if (refusal !== null) return refusal;
  }
  return null;
}

/**
 * docs/decisions.md#derivation: the text spells subagent_task literally, and it parses to an object whose
 * normalized.kind is exactly the string subagent_task. A kind spelled only with \u escapes is no subagent call.
 */
export function qualifies(m: Metadata): m is { json: Json } {
  if (!('json' in m) || jsonbRefusal(m) !== null) return false;
  const kind = member(member(m.json, 'normalized'), 'kind');
  return kind?.t === 'str' && kind.v === 'subagent_task' && metadataText(m)!.includes('subagent_task');
}

/** Text fields take non-empty JSON strings only. */
function text(v: Json | undefined): string | null {
  return v?.t === 'str' && v.v !== '' ? v.v : null;
}

/** A count: a JSON number with no fraction within [0, bigint max]. */
function count(v: Json | undefined): bigint | null {
  if (v?.t !== 'num') return null;
  const n = integerValue(v.lex);
  return n !== undefined && n >= 0n && n <= BIGINT_MAX ? n : null;
}

/** Present, not JSON null, and not a count: negative, string, fraction, bool, object, too big. */
function anomalous(v: Json | undefined): boolean {
  return v !== undefined && v.t !== 'null' && count(v) === null;
}

/** is_async: JSON true, the number 1, or the string "true". */
function flag(v: Json | undefined): number {
  if (v === undefined) return 0;
  if (v.t === 'bool') return v.v ? 1 : 0;
  if (v.t === 'str') return v.v === 'true' ? 1 : 0;
  if (v.t === 'num') return integerValue(v.lex) === 1n ? 1 : 0; // 1 and 1e0, not 1.0
  return 0;
}

// ---------------------------------------------------------------------------------------------------
// Rows

/** Every column of task_session_subagents except id (kandev/subagent-row.ts), metrics exact. */
export type Row = SubagentRow<bigint>;

// Row has exactly the table's columns but the generated id (a compile-time check).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const rowIsTheTable: Same<keyof Row, Exclude<SubagentColumn, 'id'>> = true;
void rowIsTheTable;

export interface Stats {
  attempted: bigint;
  skipped_no_identity: bigint;
  persisted: bigint;
  failed: bigint;
  anomalous_value: bigint;
  unknown_execution: bigint;
}

export const zeroStats = (): Stats => ({
  attempted: 0n, skipped_no_identity: 0n, persisted: 0n, failed: 0n, anomalous_value: 0n, unknown_execution: 0n,
});

/** Microseconds since the epoch, UTC wall-clock, printed as Postgres prints `timestamp`. */
export function timestampText(micros: number): string {
  const d = new Date(Math.floor(micros / 1000));
  const base = d.toISOString().slice(0, 19).replace('T', ' ');
  const fraction = String(((micros % 1_000_000) + 1_000_000) % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  return fraction ? `${base}.${fraction}` : base;
}

// ---------------------------------------------------------------------------------------------------
// Message writes

/** A message row as the host stores it (the columns capture reads). */
export interface Message {
  id: string;
  task_session_id: string;
  task_id: string | null;
  turn_id: string;
  metadata: Metadata;
  created_at: number; // µs
  updated_at: number; // µs
}

/** One message write: an INSERT of a whole row, an UPDATE of some columns of an existing row, or a DELETE.
 *  executionSetting is the value of subagent_context.agent_execution_id in the writing transaction
 *  (set with set_config(…, true)); null when the transaction never set it. */
export type MessageWrite =
  | { op: 'insert'; message: Message; executionSetting: string | null }
  | { op: 'delete'; id: string; executionSetting: string | null }
  | {
      op: 'update';
      id: string;
      set: Partial<Omit<Message, 'id' | 'task_session_id'>>;
      executionSetting: string | null;
    };

export const rowKey = (r: Pick<Row, 'task_session_id' | 'agent_execution_id' | 'tool_call_id'>) =>
  JSON.stringify([r.task_session_id, r.agent_execution_id, r.tool_call_id]);

/** What one message write did to capture: nothing, a counted skip, a caught failure, or an upsert. */
export type Outcome = 'none' | 'skipped' | 'failed' | 'persisted';

/** A row of subagent_context_failures, as far as the model knows it. */
export interface Failure { message_id: string; sqlstate: string; tool_call_bytes: number }

/** A key longer than a btree index entry can hold (~2.7 kB; less for incompressible text) cannot be
 *  stored: the upsert raises 54000, which capture catches (docs/reliability.md). The tests' long keys are random. */
const fitsKey = (s: string) => Buffer.byteLength(s, 'utf8') <= 2000;

export class CaptureModel {
  readonly messages = new Map<string, Message>();
  readonly rows = new Map<string, Row>();
  readonly stats = zeroStats();
  readonly failures: Failure[] = [];

  apply(w: MessageWrite): Outcome {
    let message: Message;
    if (w.op === 'delete') {
      this.messages.delete(w.id); // docs/decisions.md#merge-and-identity: deleting a message leaves its row in place
      return 'none';
    }
    if (w.op === 'insert') {
      message = { ...w.message };
    } else {
      const before = this.messages.get(w.id);
      if (!before) throw new Error(`update of unknown message ${w.id}`);
      message = { ...before, ...w.set };
    }
    this.messages.set(message.id, message);
    return this.capture(message, w.executionSetting);
  }

  /** docs/decisions.md#derivation: one qualifying write -> one upsert (or a counted skip). */
  private capture(m: Message, executionSetting: string | null): Outcome {
    if (!qualifies(m.metadata)) return 'none'; // costs nothing, counts nothing
    this.stats.attempted++;
    const doc = m.metadata.json;
    const call = text(member(doc, 'tool_call_id'));
    if (!m.task_session_id || !m.task_id || call === null) {
      this.stats.skipped_no_identity++;
      return 'skipped';
    }
    // docs/integration.md: metadata first (a non-empty string), then the transaction-local setting, else 'unknown'.
    const execution = text(member(doc, 'agent_execution_id')) ?? (executionSetting || null) ?? 'unknown';

    const st = member(member(doc, 'normalized'), 'subagent_task'); // may be missing or not an object
    const toolStatus = text(member(doc, 'status'));
    const tokens = count(member(st, 'total_tokens'));
    const duration = count(member(st, 'duration_ms'));
    const incoming: Row = {
      task_session_id: m.task_session_id,
      task_id: m.task_id,
      turn_id: m.turn_id || null,
      tool_call_id: call,
      agent_execution_id: execution,
      parent_tool_call_id: text(member(doc, 'parent_tool_call_id')),
      subagent_type: text(member(st, 'subagent_type')),
      description: text(member(st, 'description')),
      agent_id: text(member(st, 'agent_id')),
      child_session_id: text(member(st, 'child_session_id')),
      model: text(member(st, 'model')),
      agent_status: text(member(st, 'status')),
      tool_status: toolStatus,
      is_async: flag(member(st, 'is_async')),
      total_tokens: tokens === 0n ? null : tokens, // kandev omits zero: 0 means "not reported"
      tool_use_count: count(member(st, 'tool_use_count')), // a reported 0 stays 0
      duration_ms: duration === 0n ? null : duration,
      source: 'live',
      observed_at: timestampText(m.created_at),
      settled_at: isTerminalToolStatus(toolStatus) ? timestampText(m.updated_at) : null,
      updated_at: timestampText(m.updated_at),
    };
    const isAnomalous = ['total_tokens', 'tool_use_count', 'duration_ms'].some((k) => anomalous(member(st, k)));
    if (isAnomalous) this.stats.anomalous_value++;
    if (!fitsKey(call) || !fitsKey(execution)) {
      this.stats.failed++;
      // One open row per message in the failure log, however many of its frames fail (docs/reliability.md#failure-log).
      if (!this.failures.some((f) => f.message_id === m.id)) {
        this.failures.push({ message_id: m.id, sqlstate: '54000', tool_call_bytes: Buffer.byteLength(call, 'utf8') });
      }
      return 'failed';
    }

    const key = rowKey(incoming);
    const stored = this.rows.get(key);
    this.rows.set(key, stored ? merge(stored, incoming) : incoming);

    this.stats.persisted++;
    if (execution === 'unknown') this.stats.unknown_execution++;
    return 'persisted';
  }
}

/** docs/decisions.md#merge-and-identity, rule by rule. */
function merge(s: Row, e: Row): Row {
  const replaceUnlessNull = <K extends keyof Row>(k: K): Row[K] => (e[k] ?? s[k]) as Row[K];
  return {
    // Never changed on conflict (the key columns are equal by construction).
    task_session_id: s.task_session_id,
    task_id: s.task_id,
    agent_execution_id: s.agent_execution_id,
    tool_call_id: s.tool_call_id,
    source: s.source,
    observed_at: s.observed_at,
    // The first non-NULL turn wins; a stored NULL is filled.
    turn_id: s.turn_id ?? e.turn_id,
    // Non-NULL replaces, NULL never blanks.
    parent_tool_call_id: replaceUnlessNull('parent_tool_call_id'),
    subagent_type: replaceUnlessNull('subagent_type'),
    description: replaceUnlessNull('description'),
    agent_id: replaceUnlessNull('agent_id'),
    child_session_id: replaceUnlessNull('child_session_id'),
    model: replaceUnlessNull('model'),
    agent_status: replaceUnlessNull('agent_status'),
    total_tokens: replaceUnlessNull('total_tokens'),
    tool_use_count: replaceUnlessNull('tool_use_count'),
    duration_ms: replaceUnlessNull('duration_ms'),
    // Frozen once settled; before that, non-NULL replaces.
    tool_status: s.settled_at !== null ? s.tool_status : replaceUnlessNull('tool_status'),
    settled_at: s.settled_at ?? e.settled_at,
    is_async: s.is_async === 1 ? 1 : e.is_async,
    // Never moves backwards.
    updated_at: microsOf(s.updated_at) >= microsOf(e.updated_at) ? s.updated_at : e.updated_at,
  };
}

/** Microseconds since the epoch of a `timestamp` as Postgres prints it (the inverse of timestampText). */
export function microsOf(printed: string): number {
  const [base, fraction = ''] = printed.split('.');
  return Date.parse(base.replace(' ', 'T') + 'Z') * 1000 + Number(fraction.padEnd(6, '0'));
}
