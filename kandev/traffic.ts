// kandev-shaped subagent traffic with the measured shape of SPEC §1, for the demo, tests and benchmarks.
//
// planTraffic() is pure and deterministic (seeded): it decides the tasks, sessions, turns and every
// message frame. writeHistory() writes a part of it as history that predates installation (old
// timestamps, no trigger yet); replayLive() replays the rest from several concurrent writers the way
// kandev writes: one INSERT per tool call, then an UPDATE in place per later frame.
//
// At scale 1 the plan is exactly SPEC §1: 253 subagents in 127 turns of 38 sessions (one session per
// card); agent status async_launched 190, completed 57 (usage on all, a model on 49), started 5 (OpenCode,
// child_session_id only), absent 1; fan-out per turn 1→65, 2→12, 3→42, 4→5, 5→2, 8→1; one nested
// subagent; subagent_type missing on 3; largest total_tokens 275,717. Around it: plain chat messages, a
// few malformed frames (anomalous metrics, unparseable metadata) and one frame without identity.
import type pg from 'pg';
import { seededRandom } from './random.js';
import { quoteIdent } from '../src/sql.js';

export const SHAPE = {
  sessions: 38,
  fanout: { 1: 65, 2: 12, 3: 42, 4: 5, 5: 2, 8: 1 } as Record<number, number>,
  status: { async_launched: 190, completed: 57, started: 5, absent: 1 },
  completedWithModel: 49,
  typeMissing: 3,
  maxTokens: 275_717,
};

export type AgentStatus = keyof typeof SHAPE.status;

export interface Frame {
  message: string;
  /** 'insert' is kandev's first write of the row; every later frame is an 'update' of its metadata. */
  op: 'insert' | 'update';
  metadata: string | null;
  /** Counted by the capture stats (normalized.kind = subagent_task). */
  qualifies: boolean;
  /** A qualifying frame without a tool_call_id: counted as skipped, no row. */
  noIdentity?: boolean;
  /** A qualifying frame with a negative or malformed metric. */
  anomalous?: boolean;
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
  /** Frames in the order one writer sends them (the subagents of a turn interleave). */
  frames: Frame[];
}

export interface PlannedSession {
  task: string;
  session: string;
  /** Written before installation (picked up by the backfill) or replayed live. */
  history: boolean;
  turns: PlannedTurn[];
}

export interface TrafficPlan {
  sessions: PlannedSession[];
  /** Separate messages whose metadata cannot be parsed: never captured, never counted. */
  unparseable: number;
  totals: {
    subagents: number;
    turns: number;
    frames: number;
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
}

const random = seededRandom;

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

export function planTraffic(opts: PlanOptions = {}): TrafficPlan {
  const scale = Math.max(1, Math.floor(opts.scale ?? 1));
  const rnd = random(opts.seed ?? 20260812);
  const historyShare = opts.historyShare ?? 0.25;

  // Turns by fan-out, shuffled; then subagent attributes, shuffled over all subagents.
  const fanouts: number[] = [];
  for (const [n, turns] of Object.entries(SHAPE.fanout)) for (let i = 0; i < turns * scale; i++) fanouts.push(Number(n));
  shuffle(fanouts, rnd);
  const total = fanouts.reduce((a, b) => a + b, 0);

  const statuses: AgentStatus[] = [];
  for (const [s, n] of Object.entries(SHAPE.status)) for (let i = 0; i < n * scale; i++) statuses.push(s as AgentStatus);
  shuffle(statuses, rnd);
  // Which completed subagents report a model, and which subagents lack a type.
  const completedIdx = statuses.flatMap((s, i) => (s === 'completed' ? [i] : []));
  const withModel = new Set(shuffle([...completedIdx], rnd).slice(0, SHAPE.completedWithModel * scale));
  const typeMissing = new Set(shuffle([...Array(total).keys()], rnd).slice(0, SHAPE.typeMissing * scale));
  const maxTokensAt = completedIdx[Math.floor(rnd() * completedIdx.length)];
  // Two completed subagents of live sessions first send a frame with malformed metrics (anomalous,
  // then corrected), so the live capture counts them.
  let anomalousLeft = 2 * scale;
  const anomalousAt = new Set<number>();

  const sessionCount = SHAPE.sessions * scale;
  const sessions: PlannedSession[] = [];
  const historySessions = Math.round(sessionCount * historyShare);
  for (let s = 0; s < sessionCount; s++) {
    sessions.push({ task: `task-${s + 1}`, session: `session-${s + 1}`, history: s < historySessions, turns: [] });
  }

  let next = 0;
  let nestedPlaced = 0;
  const nestedWanted = scale;
  fanouts.forEach((fanout, t) => {
    const session = sessions[t % sessionCount];
    const turnId = `turn-${t + 1}`;
    const subagents: PlannedSubagent[] = [];
    for (let k = 0; k < fanout; k++, next++) {
      const status = statuses[next];
      const claude = status !== 'started';
      const types = claude ? CLAUDE_TYPES : OPENCODE_TYPES;
      subagents.push({
        toolCallId: claude ? `toolu_${String(next + 1).padStart(6, '0')}` : `call_${String(next + 1).padStart(6, '0')}`,
        status,
        subagentType: typeMissing.has(next) ? null : types[Math.floor(rnd() * types.length)],
        model: status === 'completed' && withModel.has(next) ? MODELS[Math.floor(rnd() * MODELS.length)] : null,
        totalTokens: status === 'completed'
          ? (next === maxTokensAt ? SHAPE.maxTokens : 4_000 + Math.floor(rnd() * 200_000))
          : null,
        parentToolCallId: null,
      });
    }
    // One subagent spawned by a subagent: the second of the first two-way fan-out turns.
    if (nestedPlaced < nestedWanted && fanout === 2 && subagents[0].status !== 'started' && subagents[1].status !== 'started') {
      subagents[1].parentToolCallId = subagents[0].toolCallId;
      nestedPlaced++;
    }
    if (!session.history) {
      subagents.forEach((a, k) => {
        const i = next - fanout + k;
        if (anomalousLeft > 0 && a.status === 'completed' && i !== maxTokensAt) { anomalousAt.add(i); anomalousLeft--; }
      });
    }
    const turn: PlannedTurn = { id: turnId, index: t, subagents, frames: [] };
    turn.frames = framesFor(turn, rnd, anomalousAt, next - fanout);
    session.turns.push(turn);
  });

  // Around the subagents: a frame without identity and unparseable metadata, in the first live session.
  const firstLive = sessions.find((s) => !s.history) ?? sessions[0];
  const oddTurn = firstLive.turns[0];
  oddTurn.frames.push({
    message: `msg-${oddTurn.id}-no-identity`, op: 'insert', qualifies: true, noIdentity: true,
    metadata: JSON.stringify({ title: 'Task', status: 'pending', normalized: { kind: 'subagent_task', subagent_task: { subagent_type: 'Explore', status: 'async_launched' } } }),
  });
  const unparseable = ['', 'null', '{"tool_call_id":"toolu_cut","normalized":{"kind":"subagent_ta'];
  unparseable.forEach((metadata, i) => oddTurn.frames.push({ message: `msg-${oddTurn.id}-odd-${i}`, op: 'insert', qualifies: false, metadata }));

  const live = { attempted: 0, skipped_no_identity: 0, anomalous_value: 0, persisted: 0, subagents: 0 };
  let historySubagents = 0;
  let frames = 0;
  for (const s of sessions) {
    for (const t of s.turns) {
      frames += t.frames.length;
      if (s.history) { historySubagents += t.subagents.length; continue; }
      live.subagents += t.subagents.length;
      for (const f of t.frames) {
        if (!f.qualifies) continue;
        live.attempted++;
        if (f.noIdentity) live.skipped_no_identity++;
        else live.persisted++;
        if (f.anomalous) live.anomalous_value++;
      }
    }
  }
  return {
    sessions,
    unparseable: unparseable.length,
    totals: { subagents: total, turns: fanouts.length, frames, live, history: { subagents: historySubagents } },
  };
}

/** The frames of one turn: a user prompt, then each subagent's tool call from launch to its last frame. */
function framesFor(turn: PlannedTurn, rnd: () => number, anomalousAt: Set<number>, firstIndex: number): Frame[] {
  const perCall: Frame[][] = turn.subagents.map((a, k) => {
    const msg = `msg-${a.toolCallId}`;
    const base = (status: string, sub: Record<string, unknown> | null, kind = 'subagent_task'): string => {
      const doc: Record<string, unknown> = { tool_call_id: a.toolCallId, title: a.status === 'started' ? 'task' : 'Task', status };
      if (a.parentToolCallId) doc.parent_tool_call_id = a.parentToolCallId;
      const normalized: Record<string, unknown> = { kind };
      if (sub) normalized[kind] = sub;
      doc.normalized = normalized;
      return JSON.stringify(doc);
    };
    const sub = (extra: Record<string, unknown>) => {
      const o: Record<string, unknown> = { description: `step ${k + 1} of ${turn.id}`, prompt: 'work on it' };
      if (a.subagentType) o.subagent_type = a.subagentType;
      return { ...o, ...extra };
    };
    const q = (m: string, op: Frame['op'], extra: Partial<Frame> = {}): Frame => ({ message: msg, op, metadata: m, qualifies: true, ...extra });
    switch (a.status) {
      case 'async_launched': {
        // Claude background dispatch: first written as a generic tool call, then the launch, then the
        // tool call completes at once; usage is never reported.
        const agent = { status: 'async_launched', is_async: true, agent_id: `agent-${a.toolCallId}` };
        return [
          { message: msg, op: 'insert', qualifies: false, metadata: base('pending', { name: 'Task' }, 'tool_call') },
          q(base('in_progress', sub(agent)), 'update'),
          q(base('completed', sub({ ...agent, output_file: `/tmp/${a.toolCallId}.out` })), 'update'),
        ];
      }
      case 'completed': {
        const usage: Record<string, unknown> = {
          status: 'completed', agent_id: `agent-${a.toolCallId}`, total_tokens: a.totalTokens,
          tool_use_count: Math.floor(rnd() * 40), duration_ms: 5_000 + Math.floor(rnd() * 600_000),
          result_text: 'done',
        };
        if (a.model) usage.model = a.model;
        const frames = [q(base('pending', sub({})), 'insert'), q(base('in_progress', sub({ status: 'running' })), 'update')];
        if (anomalousAt.has(firstIndex + k)) {
          frames.push(q(base('in_progress', sub({ status: 'running', total_tokens: -1, tool_use_count: '7' })), 'update', { anomalous: true }));
        }
        frames.push(q(base('completed', sub(usage)), 'update'));
        return frames;
      }
      case 'started':
        // OpenCode: the child session id only, and no final frame yet (outstanding).
        return [
          q(base('pending', sub({})), 'insert'),
          q(base('in_progress', sub({ status: 'started', child_session_id: `ses_${a.toolCallId}` })), 'update'),
        ];
      case 'absent':
        return [q(base('pending', sub({})), 'insert'), q(base('completed', sub({})), 'update')];
    }
  });
  // A user prompt opens the turn; the subagents' frames interleave round-robin (they run concurrently).
  const frames: Frame[] = [{ message: `msg-${turn.id}-prompt`, op: 'insert', qualifies: false, metadata: '{}' }];
  for (let i = 0; perCall.some((f) => i < f.length); i++) for (const f of perCall) if (i < f.length) frames.push(f[i]);
  return frames;
}


async function createSessionRows(client: pg.ClientBase, schema: string, s: PlannedSession, at: string | null) {
  const S = quoteIdent(schema);
  const ts = at === null ? `(clock_timestamp() AT TIME ZONE 'UTC')` : '$3::timestamp';
  const args = (extra: unknown[]) => (at === null ? extra : [...extra, at]);
  await client.query(`INSERT INTO ${S}.tasks (id, title, created_at, updated_at) VALUES ($1, $2, ${ts}, ${ts})`,
    args([s.task, `card ${s.task}`]));
  await client.query(`INSERT INTO ${S}.task_sessions (id, task_id, started_at, updated_at) VALUES ($1, $2, ${ts}, ${ts})`,
    args([s.session, s.task]));
}

async function createTurnRow(client: pg.ClientBase, schema: string, s: PlannedSession, t: PlannedTurn, at: string | null) {
  const S = quoteIdent(schema);
  const ts = at === null ? `(clock_timestamp() AT TIME ZONE 'UTC')` : '$4::timestamp';
  await client.query(
    `INSERT INTO ${S}.task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ($1, $2, $3, ${ts}, ${ts}, ${ts})`,
    at === null ? [t.id, s.session, s.task] : [t.id, s.session, s.task, at]);
}

/** One frame as kandev writes it. `at` null = the current UTC time (live); else an explicit timestamp. */
async function writeFrame(client: pg.ClientBase, schema: string, s: PlannedSession, t: PlannedTurn, f: Frame, at: string | null) {
  const S = quoteIdent(schema);
  const ts = (n: number) => (at === null ? `(clock_timestamp() AT TIME ZONE 'UTC')` : `$${n}::timestamp`);
  if (f.op === 'insert') {
    await client.query(
      `INSERT INTO ${S}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, '', $6, $7, ${ts(8)}, ${ts(8)})`,
      [f.message, s.session, s.task, t.id, f.message.endsWith('-prompt') ? 'user' : 'agent',
       f.message.endsWith('-prompt') ? 'message' : 'tool_call', f.metadata, ...(at === null ? [] : [at])]);
  } else {
    await client.query(`UPDATE ${S}.task_session_messages SET metadata = $2, updated_at = ${ts(3)} WHERE id = $1`,
      [f.message, f.metadata, ...(at === null ? [] : [at])]);
  }
}

function historyTime(base: number, step: number): string {
  return new Date(base + step * 1000).toISOString().replace('T', ' ').replace('Z', '');
}

/** Writes the history sessions (before installation): old timestamps, one second apart. Returns frames written. */
export async function writeHistory(client: pg.ClientBase, schema: string, plan: TrafficPlan,
  onProgress?: (done: number, total: number) => void): Promise<number> {
  const sessions = plan.sessions.filter((s) => s.history);
  const total = sessions.reduce((n, s) => n + s.turns.reduce((m, t) => m + t.frames.length, 0), 0);
  const base = Date.UTC(2026, 7, 12, 9, 0, 0);
  let step = 0;
  await client.query('BEGIN');
  try {
    for (const s of sessions) {
      await createSessionRows(client, schema, s, historyTime(base, step));
      for (const t of s.turns) {
        await createTurnRow(client, schema, s, t, historyTime(base, step));
        for (const f of t.frames) {
          await writeFrame(client, schema, s, t, f, historyTime(base, ++step));
          onProgress?.(step, total);
        }
      }
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
  return step;
}

export interface ReplayOptions {
  /** Concurrent writers (connections). Default 4. Sessions are dealt to writers round-robin. */
  writers?: number;
  /**
   * Writer 0 names its execution through the transaction-local setting (SPEC §5), as a host that knows
   * its executions would. Default true.
   */
  executionIds?: boolean;
  onProgress?: (done: number, total: number) => void;
}

/** Replays the live sessions from concurrent writers, each frame its own transaction. Returns frames written. */
export async function replayLive(pool: pg.Pool, schema: string, plan: TrafficPlan, opts: ReplayOptions = {}): Promise<number> {
  const sessions = plan.sessions.filter((s) => !s.history);
  const writers = Math.max(1, Math.min(opts.writers ?? 4, sessions.length));
  const total = sessions.reduce((n, s) => n + s.turns.reduce((m, t) => m + t.frames.length, 0), 0);
  let done = 0;
  await Promise.all([...Array(writers).keys()].map(async (w) => {
    const client = await pool.connect();
    try {
      for (const s of sessions.filter((_, i) => i % writers === w)) {
        await createSessionRows(client, schema, s, null);
        for (const t of s.turns) {
          await createTurnRow(client, schema, s, t, null);
          for (const f of t.frames) {
            if (w === 0 && opts.executionIds !== false) {
              await client.query('BEGIN');
              await client.query(`SELECT set_config('subagent_context.agent_execution_id', $1, true)`, [`exec-${s.session}`]);
              await writeFrame(client, schema, s, t, f, null);
              await client.query('COMMIT');
            } else {
              await writeFrame(client, schema, s, t, f, null);
            }
            opts.onProgress?.(++done, total);
          }
        }
      }
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }));
  return done;
}

/** Live persisted writes that writer 0 stores under a named execution (for the expected unknown_execution). */
export function namedExecutionWrites(plan: TrafficPlan, writers = 4): number {
  const sessions = plan.sessions.filter((s) => !s.history);
  const w = Math.max(1, Math.min(writers, sessions.length));
  let n = 0;
  sessions.forEach((s, i) => {
    if (i % w !== 0) return;
    for (const t of s.turns) for (const f of t.frames) if (f.qualifies && !f.noIdentity) n++;
  });
  return n;
}
