// The one model of kandev's message traffic, for the demo, the tests and the benchmarks: the plan.
//
// planTraffic() is pure and deterministic (seeded): it decides the tasks, sessions, turns and every
// write of every message, as kandev 0.91 makes them:
// - metadata is Go's encoding/json (kandev/gojson.ts): sorted keys, `<` `>` `&` as \u escapes;
// - a message is INSERTed once, in a transaction holding pg_advisory_xact_lock(hashtextextended(
//   'task_session_messages:' || session_id, 0)), then every later frame is one autocommit UPDATE of the
//   whole row document (content, requests_input, type, metadata, updated_at);
// - when a turn ends, CompletePendingToolCallsForTurn rewrites the turn's still-open tool calls in one
//   statement with jsonb_set(metadata::jsonb, ...)::text (jsonb's canonical text, with spaces) and
//   updated_at = CURRENT_TIMESTAMP;
// - a session's mix: streamed agent text, tool calls of every kind kandev normalizes (read_file,
//   modify_file with diffs, shell_exec with stdout, code_search, http_request, manage_todos) with
//   payloads of 0.3-20 KB, permission requests, message deletes, an abandoned session deleted, and the
//   subagent calls.
//
// At scale 1 the subagent calls are exactly the store README.md opens with: 253 subagents in 127 turns of 38 sessions (one
// session per card); agent status async_launched 190, completed 57 (usage on all, a model on 49),
// started 5 (OpenCode, child_session_id only), absent 1; fan-out per turn 1→65, 2→12, 3→42, 4→5, 5→2,
// 8→1; one nested subagent; subagent_type missing on 3; largest total_tokens 275,717; completed ones
// report a result_text of up to 50 KB. Around them: a few malformed frames (anomalous metrics, a frame
// without identity and, on hosts that can hold it, unparseable metadata).
//
// Nothing here touches a database: kandev/traffic-write.ts turns the planned writes into kandev's
// statements.
import { seededRandom } from './random.js';
import { goMarshal } from './gojson.js';
import type { SubagentRow } from './subagent-row.js';
import { payloadSize, sourceText, stdoutText, htmlText, diffText, shellCommand, prose, pick, FILES, IDENT } from './payloads.js';

export const SHAPE = {
  sessions: 38,
  fanout: { 1: 65, 2: 12, 3: 42, 4: 5, 5: 2, 8: 1 } as Record<number, number>,
  status: { async_launched: 190, completed: 57, started: 5, absent: 1 },
  completedWithModel: 49,
  typeMissing: 3,
  maxTokens: 275_717,
  maxResultText: 50 * 1024,
};

export type AgentStatus = keyof typeof SHAPE.status;

/** The tool kinds kandev normalizes, besides subagent_task. */
export const TOOL_KINDS = ['read_file', 'modify_file', 'shell_exec', 'code_search', 'http_request', 'manage_todos'] as const;
export type ToolKind = typeof TOOL_KINDS[number];

/** What kandev's own subagent writer knows about a subagent frame (its upsert's values). */
export type SubagentValues = Pick<SubagentRow<number>,
  | 'tool_call_id' | 'parent_tool_call_id' | 'subagent_type' | 'description' | 'agent_id' | 'child_session_id'
  | 'model' | 'agent_status' | 'tool_status' | 'is_async' | 'total_tokens' | 'tool_use_count' | 'duration_ms'>;

/** What a write is, for accounting: the stats it moves and the traffic classes of the benchmarks. */
export type WriteClass = 'text' | 'prompt' | 'tool' | 'permission' | 'subagent' | 'bulk' | 'delete' | 'odd';

interface RowDocument {
  content: string;
  requestsInput: 0 | 1;
  type: string;
  metadata: string | null;
}

export type Write =
  | ({ op: 'insert'; message: string; authorType: 'user' | 'agent' } & RowDocument & WriteFacts)
  | ({ op: 'update'; message: string } & RowDocument & WriteFacts)
  /** CompletePendingToolCallsForTurn: `qualifying` is how many subagent rows it rewrites. */
  | ({ op: 'complete_pending'; qualifying: number } & Omit<WriteFacts, 'qualifies'> & { qualifies: false })
  | ({ op: 'delete_message'; message: string } & Omit<WriteFacts, 'qualifies'> & { qualifies: false });

interface WriteFacts {
  class: WriteClass;
  /** normalized.kind = subagent_task after the write: counted by the capture stats. */
  qualifies: boolean;
  /** A qualifying write without a tool_call_id: counted as skipped, no row. */
  noIdentity?: boolean;
  /** A qualifying write with a negative or malformed metric. */
  anomalous?: boolean;
  /** For subagent frames: what kandev's own writer upserts. */
  subagent?: SubagentValues;
}

export interface PlannedSubagent {
  toolCallId: string;
  status: AgentStatus;
  subagentType: string | null;
  model: string | null;
  totalTokens: number | null;
  parentToolCallId: string | null;
}

export interface PlannedTurn {
  id: string;
  index: number;
  subagents: PlannedSubagent[];
  /** Writes in the order one writer sends them. */
  writes: Write[];
}

export interface PlannedSession {
  task: string;
  session: string;
  /** Written before installation (picked up by the backfill) or replayed live. */
  history: boolean;
  /** An abandoned session of an existing card: written, then deleted with all its messages. */
  abandoned?: boolean;
  turns: PlannedTurn[];
}

export interface TrafficPlan {
  sessions: PlannedSession[];
  totals: {
    subagents: number;
    /** Turns with at least one subagent. */
    turns: number;
    writes: number;
    /** Writes by class, over the whole plan. */
    byClass: Record<WriteClass, number>;
    /** Expected capture stats for the live part (history is written before the trigger exists). */
    live: { attempted: number; skipped_no_identity: number; anomalous_value: number; persisted: number; subagents: number };
    history: { subagents: number };
  };
}

export interface PlanOptions {
  /** Multiplies sessions and turns (the shape's proportions stay). Default 1. */
  scale?: number;
  /** Share of sessions written as history before installation. Default 0.25. */
  historyShare?: number;
  seed?: number;
  /** Non-subagent tool calls per turn (each a pending, running and final frame). Default 6. */
  toolCallsPerTurn?: number;
  /** Turns without any subagent, per session. Default 1. */
  plainTurnsPerSession?: number;
  /** Write a few unparseable metadata texts (a host with kandev's metadata index refuses them). Default true. */
  invalidJson?: boolean;
  /** Payload sizes of tool calls, bytes. Default [300, 20000]. */
  payloadBytes?: [number, number];
}

function shuffle<T>(items: T[], rnd: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

const CLAUDE_TYPES = ['general-purpose', 'Explore', 'security-reviewer', 'code-reviewer', 'test-writer'];
const OPENCODE_TYPES = ['general', 'explore'];
const MODELS = ['claude-opus-5[1m]', 'claude-sonnet-5', 'claude-haiku-5'];

/** The Go-encoded metadata of a tool-call message (kandev's map: top-level fields plus normalized). */
function toolMetadata(callId: string | null, title: string, status: string, kind: string, payload: Record<string, unknown> | null,
  extra: Record<string, unknown> = {}): string {
  const doc: Record<string, unknown> = { title, status, ...extra };
  if (callId !== null) doc.tool_call_id = callId;
  const normalized: Record<string, unknown> = { kind };
  if (payload) normalized[kind] = payload;
  doc.normalized = normalized;
  return goMarshal(doc);
}

export function planTraffic(opts: PlanOptions = {}): TrafficPlan {
  const scale = Math.max(1, Math.floor(opts.scale ?? 1));
  const rnd = seededRandom(opts.seed ?? 20260812);
  const historyShare = opts.historyShare ?? 0.25;
  const toolCalls = opts.toolCallsPerTurn ?? 6;
  const plainTurns = opts.plainTurnsPerSession ?? 1;
  const [minBytes, maxBytes] = opts.payloadBytes ?? [300, 20_000];

  // Turns by fan-out, shuffled; then subagent attributes, shuffled over all subagents.
  const fanouts: number[] = [];
  for (const [n, turns] of Object.entries(SHAPE.fanout)) for (let i = 0; i < turns * scale; i++) fanouts.push(Number(n));
  shuffle(fanouts, rnd);
  const total = fanouts.reduce((a, b) => a + b, 0);

  const statuses: AgentStatus[] = [];
  for (const [s, n] of Object.entries(SHAPE.status)) for (let i = 0; i < n * scale; i++) statuses.push(s as AgentStatus);
  shuffle(statuses, rnd);
  const completedIdx = statuses.flatMap((s, i) => (s === 'completed' ? [i] : []));
  const withModel = new Set(shuffle([...completedIdx], rnd).slice(0, SHAPE.completedWithModel * scale));
  const typeMissing = new Set(shuffle([...Array(total).keys()], rnd).slice(0, SHAPE.typeMissing * scale));
  const maxTokensAt = completedIdx[Math.floor(rnd() * completedIdx.length)];
  const maxResultAt = completedIdx[Math.floor(rnd() * completedIdx.length)];
  // Two completed subagents of live sessions first send a frame with malformed metrics (anomalous,
  // then corrected), so the live capture counts them.
  let anomalousLeft = 2 * scale;

  const sessionCount = SHAPE.sessions * scale;
  const sessions: PlannedSession[] = [];
  const historySessions = Math.round(sessionCount * historyShare);
  for (let s = 0; s < sessionCount; s++) {
    sessions.push({ task: `task-${s + 1}`, session: `session-${s + 1}`, history: s < historySessions, turns: [] });
  }

  let next = 0;
  let nestedPlaced = 0;
  const ctx: TurnContext = { rnd, toolCalls, minBytes, maxBytes, toolSeq: 0 };
  fanouts.forEach((fanout, t) => {
    const session = sessions[t % sessionCount];
    const subagents: PlannedSubagent[] = [];
    const anomalous = new Set<number>();
    for (let k = 0; k < fanout; k++, next++) {
      const status = statuses[next];
      const claude = status !== 'started';
      const types = claude ? CLAUDE_TYPES : OPENCODE_TYPES;
      subagents.push({
        toolCallId: claude ? `toolu_${String(next + 1).padStart(6, '0')}` : `call_${String(next + 1).padStart(6, '0')}`,
        status,
        subagentType: typeMissing.has(next) ? null : pick(rnd, types),
        model: status === 'completed' && withModel.has(next) ? pick(rnd, MODELS) : null,
        totalTokens: status === 'completed' ? (next === maxTokensAt ? SHAPE.maxTokens : 4_000 + Math.floor(rnd() * 200_000)) : null,
        parentToolCallId: null,
      });
      if (!session.history && anomalousLeft > 0 && status === 'completed' && next !== maxTokensAt) { anomalous.add(k); anomalousLeft--; }
    }
    // One subagent spawned by a subagent: the second of the first two-way fan-out turns.
    if (nestedPlaced < scale && fanout === 2 && subagents[0].status !== 'started' && subagents[1].status !== 'started') {
      subagents[1].parentToolCallId = subagents[0].toolCallId;
      nestedPlaced++;
    }
    const resultAt = new Set(subagents.flatMap((_, k) => (next - fanout + k === maxResultAt ? [k] : [])));
    const turn: PlannedTurn = { id: `turn-${t + 1}`, index: t, subagents, writes: [] };
    turn.writes = turnWrites(ctx, turn, anomalous, resultAt);
    session.turns.push(turn);
  });
  // Turns without subagents, after each session's fan-out turns.
  for (const s of sessions) {
    for (let k = 0; k < plainTurns; k++) {
      const turn: PlannedTurn = { id: `turn-${s.session}-plain-${k + 1}`, index: -1, subagents: [], writes: [] };
      turn.writes = turnWrites(ctx, turn, new Set(), new Set());
      s.turns.push(turn);
    }
  }

  // Odd writes, in the first live session: a qualifying frame without identity, and (where the host
  // can hold them) metadata that does not parse. Its own turn, never bulk-completed: kandev's
  // jsonb_set rewrite would fail on unparseable rows.
  const firstLive = sessions.find((s) => !s.history) ?? sessions[0];
  const odd: PlannedTurn = { id: `turn-${firstLive.session}-odd`, index: -1, subagents: [], writes: [] };
  odd.writes.push({ op: 'insert', class: 'odd', message: `msg-${odd.id}-no-identity`, authorType: 'agent', content: '', requestsInput: 0,
    type: 'tool_call', qualifies: true, noIdentity: true,
    metadata: toolMetadata(null, 'Task', 'pending', 'subagent_task', { subagent_type: 'Explore', status: 'async_launched' }) });
  if (opts.invalidJson ?? true) {
    ['', 'null', '{"tool_call_id":"toolu_cut","normalized":{"kind":"subagent_ta'].forEach((metadata, i) =>
      odd.writes.push({ op: 'insert', class: 'odd', message: `msg-${odd.id}-${i}`, authorType: 'agent', content: '', requestsInput: 0,
        type: 'tool_call', metadata, qualifies: false }));
  }
  firstLive.turns.push(odd);

  // An abandoned session of the last live card: a turn of ordinary traffic, then the session is deleted
  // (kandev's DeleteTaskSession); its messages go with it by cascade.
  const lastLive = sessions[sessions.length - 1];
  const abandoned: PlannedSession = { task: lastLive.task, session: `${lastLive.session}-abandoned`, history: false, abandoned: true, turns: [] };
  const at: PlannedTurn = { id: `turn-${abandoned.session}-1`, index: -1, subagents: [], writes: [] };
  at.writes = turnWrites(ctx, at, new Set(), new Set());
  abandoned.turns.push(at);
  sessions.push(abandoned);

  const byClass = { text: 0, prompt: 0, tool: 0, permission: 0, subagent: 0, bulk: 0, delete: 0, odd: 0 };
  const live = { attempted: 0, skipped_no_identity: 0, anomalous_value: 0, persisted: 0, subagents: 0 };
  let historySubagents = 0;
  let writes = 0;
  for (const s of sessions) {
    for (const t of s.turns) {
      for (const w of t.writes) { byClass[w.class]++; writes++; }
      if (s.history) { historySubagents += t.subagents.length; continue; }
      live.subagents += t.subagents.length;
      for (const w of t.writes) {
        const n = w.op === 'complete_pending' ? w.qualifying : w.qualifies ? 1 : 0;
        live.attempted += n;
        if (w.noIdentity) live.skipped_no_identity += n;
        else live.persisted += n;
        if (w.anomalous) live.anomalous_value += n;
      }
    }
  }
  return {
    sessions,
    totals: { subagents: total, turns: fanouts.length, writes, byClass, live, history: { subagents: historySubagents } },
  };
}

interface TurnContext {
  rnd: () => number;
  toolCalls: number;
  minBytes: number;
  maxBytes: number;
  toolSeq: number;
}

/** The writes of one streamed agent text message: an INSERT, then an UPDATE per chunk of the whole text. */
function streamedText(ctx: TurnContext, message: string, chunks: number): Write[] {
  const { rnd } = ctx;
  const out: Write[] = [];
  let content = '';
  for (let k = 0; k <= chunks; k++) {
    content += prose(rnd, 40 + Math.floor(rnd() * 200)) + ' ';
    const doc = { content, requestsInput: 0 as const, type: 'message', metadata: '{}' };
    out.push(k === 0 ? { op: 'insert', class: 'text', message, authorType: 'agent', qualifies: false, ...doc }
                     : { op: 'update', class: 'text', message, qualifies: false, ...doc });
  }
  return out;
}

/** A tool call of one of kandev's normalized kinds: pending, running, then (unless left open) its result. */
function toolCall(ctx: TurnContext, turn: PlannedTurn, kind: ToolKind, leaveOpen: boolean): Write[] {
  const { rnd } = ctx;
  const n = ++ctx.toolSeq;
  const callId = `toolu_t${String(n).padStart(7, '0')}`;
  const message = `msg-${turn.id}-tool-${n}`;
  const bytes = payloadSize(rnd, ctx.minBytes, ctx.maxBytes);
  const file = pick(rnd, FILES);
  let title: string;
  let input: Record<string, unknown>;
  let result: Record<string, unknown>;
  switch (kind) {
    case 'read_file':
      title = `Read ${file}`;
      input = { file_path: file, offset: 0, limit: 400 };
      result = { ...input, content: sourceText(rnd, bytes) };
      break;
    case 'modify_file':
      title = `Edit ${file}`;
      input = { file_path: file };
      result = { file_path: file, mutations: [{ type: 'patch', diff: diffText(rnd, bytes) }] };
      break;
    case 'shell_exec': {
      const command = shellCommand(rnd);
      title = command;
      input = { command, description: 'run the checks', timeout_ms: 120000 };
      result = { ...input, output: { exit_code: rnd() < 0.8 ? 0 : 1, stdout: stdoutText(rnd, bytes), stderr: '' } };
      break;
    }
    case 'code_search': {
      const pattern = `${pick(rnd, IDENT)}.*(<|>=)`;
      title = `grep ${pattern}`;
      input = { pattern, path: 'apps', glob: '*.{go,ts,tsx}' };
      result = { ...input, matches: stdoutText(rnd, bytes).split('\n').map((l, i) => `${file}:${i + 1}: ${l}`) };
      break;
    }
    case 'http_request': {
      const url = `https://pkg.go.dev/search?q=${pick(rnd, IDENT)}&m=package`;
      title = `Fetch ${url}`;
      input = { url, method: 'GET' };
      result = { ...input, status_code: 200, response: htmlText(rnd, bytes) };
      break;
    }
    case 'manage_todos': {
      const todos = Array.from({ length: Math.max(2, Math.floor(bytes / 120)) }, (_, i) => ({
        content: `check ${pick(rnd, IDENT)} < ${pick(rnd, IDENT)} && fix ${pick(rnd, FILES)}`,
        status: i < 2 ? 'completed' : i === 2 ? 'in_progress' : 'pending', active_form: `checking step ${i + 1}` }));
      title = 'Update todos';
      input = { todos: todos.slice(0, 2) };
      result = { todos };
      break;
    }
  }
  const meta = (status: string, payload: Record<string, unknown>) => toolMetadata(callId, title, status, kind, payload);
  const doc = (status: string, payload: Record<string, unknown>) => ({ content: '', requestsInput: 0 as const, type: 'tool_call', metadata: meta(status, payload), qualifies: false as const });
  const writes: Write[] = [
    { op: 'insert', class: 'tool', message, authorType: 'agent', ...doc('pending', input) },
    { op: 'update', class: 'tool', message, ...doc('in_progress', input) },
  ];
  if (!leaveOpen) writes.push({ op: 'update', class: 'tool', message, ...doc(rnd() < 0.95 ? 'completed' : 'failed', result) });
  return writes;
}

/** A permission request (requests_input = 1 until answered), then the shell call it guarded. */
function permissionRequest(ctx: TurnContext, turn: PlannedTurn): Write[] {
  const { rnd } = ctx;
  const n = ++ctx.toolSeq;
  const message = `msg-${turn.id}-permission-${n}`;
  const command = shellCommand(rnd);
  const metadata = (status: string) => goMarshal({
    tool_call_id: `toolu_p${String(n).padStart(7, '0')}`, status, title: command,
    action: { type: 'shell_exec', command },
    options: [{ kind: 'allow_once', name: 'Allow', option_id: 'allow' }, { kind: 'allow_always', name: 'Always allow', option_id: 'always' },
      { kind: 'reject_once', name: 'Reject', option_id: 'reject' }],
  });
  const content = `Allow the agent to run: ${command}`;
  return [
    { op: 'insert', class: 'permission', message, authorType: 'agent', content, requestsInput: 1, type: 'permission_request', metadata: metadata('pending'), qualifies: false },
    { op: 'update', class: 'permission', message, content, requestsInput: 0, type: 'permission_request', metadata: metadata(rnd() < 0.9 ? 'approved' : 'rejected'), qualifies: false },
  ];
}

/** The writes of one subagent's tool call, from its launch to its last frame. */
function subagentWrites(ctx: TurnContext, turn: PlannedTurn, k: number, anomalous: boolean, fullReport: boolean, turnEnds: boolean): Write[] {
  const { rnd } = ctx;
  const a = turn.subagents[k];
  const message = `msg-${a.toolCallId}`;
  const title = a.status === 'started' ? 'task' : 'Task';
  const description = `step ${k + 1} of ${turn.id}`;
  const prompt = prose(rnd, payloadSize(rnd, 400, 3000));
  const base = (extra: Record<string, unknown>) => {
    const o: Record<string, unknown> = { description, prompt };
    if (a.subagentType) o.subagent_type = a.subagentType;
    return { ...o, ...extra };
  };
  const top = a.parentToolCallId ? { parent_tool_call_id: a.parentToolCallId } : {};
  const values = (status: string, sub: Record<string, unknown>): SubagentValues => ({
    tool_call_id: a.toolCallId, parent_tool_call_id: a.parentToolCallId, subagent_type: a.subagentType, description,
    agent_id: (sub.agent_id as string) ?? null, child_session_id: (sub.child_session_id as string) ?? null,
    model: (sub.model as string) ?? null, agent_status: (sub.status as string) ?? null, tool_status: status,
    is_async: sub.is_async === true ? 1 : 0,
    total_tokens: typeof sub.total_tokens === 'number' && sub.total_tokens > 0 ? sub.total_tokens : null,
    tool_use_count: typeof sub.tool_use_count === 'number' && sub.tool_use_count >= 0 ? sub.tool_use_count : null,
    duration_ms: typeof sub.duration_ms === 'number' && sub.duration_ms > 0 ? sub.duration_ms : null,
  });
  const frame = (op: 'insert' | 'update', status: string, sub: Record<string, unknown>, extra: Partial<WriteFacts> = {}): Write => {
    const doc = { content: '', requestsInput: 0 as const, type: 'tool_call', metadata: toolMetadata(a.toolCallId, title, status, 'subagent_task', base(sub), top) };
    const facts = { class: 'subagent' as const, qualifies: true, subagent: values(status, sub), ...extra };
    return op === 'insert' ? { op, message, authorType: 'agent', ...doc, ...facts } : { op, message, ...doc, ...facts };
  };
  switch (a.status) {
    case 'async_launched': {
      // Claude background dispatch: first written as a generic tool call, then the launch, then the
      // tool call completes at once; usage is never reported.
      const agent = { status: 'async_launched', is_async: true, agent_id: `agent-${a.toolCallId}` };
      return [
        { op: 'insert', class: 'subagent', message, authorType: 'agent', content: '', requestsInput: 0, type: 'tool_call', qualifies: false,
          metadata: toolMetadata(a.toolCallId, title, 'pending', 'tool_call', { name: 'Task', arguments: { description, prompt } }, top) },
        frame('update', 'in_progress', agent),
        frame('update', 'completed', { ...agent, output_file: `/tmp/claude/${a.toolCallId}.output` }),
      ];
    }
    case 'completed': {
      const usage: Record<string, unknown> = {
        status: 'completed', agent_id: `agent-${a.toolCallId}`, total_tokens: a.totalTokens,
        tool_use_count: Math.floor(rnd() * 40), duration_ms: 5_000 + Math.floor(rnd() * 600_000),
        result_text: fullReport ? prose(rnd, SHAPE.maxResultText) : prose(rnd, payloadSize(rnd, 1_000, SHAPE.maxResultText)),
      };
      if (a.model) usage.model = a.model;
      const writes = [frame('insert', 'pending', {}), frame('update', 'in_progress', { status: 'running' })];
      if (anomalous) writes.push(frame('update', 'in_progress', { status: 'running', total_tokens: -1, tool_use_count: '7' }, { anomalous: true }));
      writes.push(frame('update', 'completed', usage));
      return writes;
    }
    case 'started':
      // OpenCode: the child session id only, and no final frame yet (outstanding; its turn is still open).
      return [frame('insert', 'pending', {}), frame('update', 'in_progress', { status: 'started', child_session_id: `ses_${a.toolCallId}` })];
    case 'absent':
      // Never reports a status of its own; its tool call is closed by the turn's bulk completion, or by
      // a last frame of its own when the turn is still open.
      return [frame('insert', 'pending', {}), frame('update', turnEnds ? 'in_progress' : 'completed', {})];
  }
}

/**
 * One turn: the user's prompt, streamed agent text, tool calls (one in ten left open), a permission
 * request, the subagents' frames interleaved round-robin among them (they run concurrently), closing
 * text, a deleted message, and the bulk completion of whatever the turn left open.
 */
function turnWrites(ctx: TurnContext, turn: PlannedTurn, anomalous: Set<number>, fullReport: Set<number>): Write[] {
  const { rnd } = ctx;
  const writes: Write[] = [{
    op: 'insert', class: 'prompt', message: `msg-${turn.id}-prompt`, authorType: 'user', content: prose(rnd, 200 + Math.floor(rnd() * 800)),
    requestsInput: 0, type: 'message', metadata: '{}', qualifies: false,
  }];
  writes.push(...streamedText(ctx, `msg-${turn.id}-text-1`, 2 + Math.floor(rnd() * 4)));
  const tools: Write[][] = [];
  let open = 0;
  for (let i = 0; i < ctx.toolCalls; i++) {
    const leaveOpen = rnd() < 0.1;
    if (leaveOpen) open++;
    tools.push(toolCall(ctx, turn, TOOL_KINDS[(ctx.toolSeq + i) % TOOL_KINDS.length], leaveOpen));
  }
  if (ctx.toolCalls > 0) tools.splice(Math.floor(rnd() * tools.length), 0, permissionRequest(ctx, turn));
  // A turn with an OpenCode subagent still running has not ended (its subagents stay outstanding).
  const turnEnds = !turn.subagents.some((a) => a.status === 'started');
  const subs = turn.subagents.map((_, k) => subagentWrites(ctx, turn, k, anomalous.has(k), fullReport.has(k), turnEnds));
  // Tool calls run one after another; the subagents' frames interleave with them.
  const lanes = [tools.flat(), ...subs];
  for (let i = 0; lanes.some((l) => i < l.length); i++) for (const l of lanes) if (i < l.length) writes.push(l[i]);
  writes.push(...streamedText(ctx, `msg-${turn.id}-text-2`, 1 + Math.floor(rnd() * 3)));
  // A queued message the user withdrew.
  writes.push({ op: 'insert', class: 'prompt', message: `msg-${turn.id}-withdrawn`, authorType: 'user', content: 'also check the docs',
    requestsInput: 0, type: 'message', metadata: '{}', qualifies: false });
  writes.push({ op: 'delete_message', class: 'delete', message: `msg-${turn.id}-withdrawn`, qualifies: false });
  // The turn ends: CompletePendingToolCallsForTurn closes what is still open.
  const qualifying = turn.subagents.filter((a) => a.status === 'absent').length;
  if (turnEnds && (open > 0 || qualifying > 0)) writes.push({ op: 'complete_pending', class: 'bulk', qualifying, qualifies: false });
  return writes;
}
