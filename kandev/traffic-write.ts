// kandev's statements for the planned writes of kandev/traffic-plan.ts, as kandev 0.91 issues them.
//
// executeWrite() is the one place that turns a planned write into kandev's statements; writeHistory()
// and replayLive() drive it for the demo and tests, the benchmarks drive it directly.
import type pg from 'pg';
import { quoteIdent } from '#sql';
import { utcTimestamp } from '../src/timestamp.js';
import type { PlannedSession, PlannedTurn, TrafficPlan, Write } from './traffic-plan.js';

/**
 * The statements kandev 0.91 issues. Each carries a name for a benchmark that PREPAREs it itself in SQL;
 * executeWrite() sends the text alone, as an unnamed statement: a named prepared statement lives on one
 * server connection, so through pgbouncer in transaction pooling the next transaction's connection either
 * lacks it or already has it ("prepared statement … already exists").
 */
export function kandevStatements(schema: string) {
  const S = quoteIdent(schema);
  return {
    lock: { name: `kandev-lock-${schema}`, text: `SELECT pg_advisory_xact_lock(hashtextextended('task_session_messages:' || $1, 0))` },
    insert: {
      name: `kandev-insert-${schema}`,
      text: `INSERT INTO ${S}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, author_id, content,
               requests_input, type, metadata, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, '', $6, $7, $8, $9, coalesce($10::timestamp, clock_timestamp() AT TIME ZONE 'UTC'),
                     coalesce($10::timestamp, clock_timestamp() AT TIME ZONE 'UTC'))`,
    },
    update: {
      name: `kandev-update-${schema}`,
      text: `UPDATE ${S}.task_session_messages SET content = $2, requests_input = $3, type = $4, metadata = $5,
               updated_at = coalesce($6::timestamp, clock_timestamp() AT TIME ZONE 'UTC') WHERE id = $1`,
    },
    completePending: {
      name: `kandev-complete-pending-${schema}`,
      text: `UPDATE ${S}.task_session_messages
                SET metadata = jsonb_set(metadata::jsonb, '{status}', '"complete"')::text, updated_at = CURRENT_TIMESTAMP
              WHERE turn_id = $1 AND type = 'tool_call' AND metadata::jsonb ->> 'status' IN ('pending', 'in_progress')`,
    },
    deleteMessage: { name: `kandev-delete-message-${schema}`, text: `DELETE FROM ${S}.task_session_messages WHERE id = $1` },
    deleteSession: { name: `kandev-delete-session-${schema}`, text: `DELETE FROM ${S}.task_sessions WHERE id = $1` },
  };
}

export interface WriteTarget {
  schema: string;
  session: string;
  task: string;
  turn: string;
  /** An explicit UTC timestamp for created_at / updated_at (history); null = the current UTC time. */
  at?: string | null;
  /** Name the execution through the transaction-local setting (docs/integration.md). */
  executionId?: string;
  /** Already inside a transaction (history): no BEGIN/COMMIT of its own. */
  inTransaction?: boolean;
}

/** One planned write, as kandev issues it. */
export async function executeWrite(client: pg.ClientBase, w: Write, t: WriteTarget): Promise<void> {
  const st = kandevStatements(t.schema);
  const at = t.at ?? null;
  const tx = !t.inTransaction && (w.op === 'insert' || t.executionId !== undefined);
  if (tx) await client.query('BEGIN');
  try {
    if (t.executionId !== undefined) {
      await client.query(`SELECT set_config('subagent_context.agent_execution_id', $1, true)`, [t.executionId]);
    }
    switch (w.op) {
      case 'insert':
        await client.query({ text: st.lock.text, values: [t.session] });
        await client.query({ text: st.insert.text, values: [w.message, t.session, t.task, t.turn, w.authorType, w.content, w.requestsInput, w.type, w.metadata, at] });
        break;
      case 'update':
        await client.query({ text: st.update.text, values: [w.message, w.content, w.requestsInput, w.type, w.metadata, at] });
        break;
      case 'complete_pending':
        await client.query({ text: st.completePending.text, values: [t.turn] });
        break;
      case 'delete_message':
        await client.query({ text: st.deleteMessage.text, values: [w.message] });
        break;
    }
    if (tx) await client.query('COMMIT');
  } catch (err) {
    if (tx) await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** The task (cards are kandev's tasks) and session rows; idempotent for the task. */
export async function createSessionRows(client: pg.ClientBase, schema: string, s: PlannedSession, at: string | null) {
  const S = quoteIdent(schema);
  const ts = `coalesce($3::timestamp, clock_timestamp() AT TIME ZONE 'UTC')`;
  await client.query(`INSERT INTO ${S}.tasks (id, title, created_at, updated_at) VALUES ($1, $2, ${ts}, ${ts}) ON CONFLICT (id) DO NOTHING`,
    [s.task, `card ${s.task}`, at]);
  await client.query(`INSERT INTO ${S}.task_sessions (id, task_id, started_at, updated_at) VALUES ($1, $2, ${ts}, ${ts})`, [s.session, s.task, at]);
}

export async function createTurnRow(client: pg.ClientBase, schema: string, s: PlannedSession, t: PlannedTurn, at: string | null) {
  const S = quoteIdent(schema);
  const ts = `coalesce($4::timestamp, clock_timestamp() AT TIME ZONE 'UTC')`;
  await client.query(`INSERT INTO ${S}.task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
                      VALUES ($1, $2, $3, ${ts}, ${ts}, ${ts})`, [t.id, s.session, s.task, at]);
}

export async function deleteSession(client: pg.ClientBase, schema: string, session: string) {
  await client.query({ text: kandevStatements(schema).deleteSession.text, values: [session] });
}

function historyTime(base: number, step: number): string {
  return utcTimestamp(base + step * 1000);
}

const writeCount = (sessions: PlannedSession[]) => sessions.reduce((n, s) => n + s.turns.reduce((m, t) => m + t.writes.length, 0), 0);

/** Writes the history sessions (before installation), in one transaction: old timestamps, one second apart. Returns writes made. */
export async function writeHistory(client: pg.ClientBase, schema: string, plan: TrafficPlan,
  onProgress?: (done: number, total: number) => void): Promise<number> {
  const sessions = plan.sessions.filter((s) => s.history);
  const total = writeCount(sessions);
  const base = Date.UTC(2026, 7, 12, 9, 0, 0);
  let step = 0;
  await client.query('BEGIN');
  try {
    for (const s of sessions) {
      await createSessionRows(client, schema, s, historyTime(base, step));
      for (const t of s.turns) {
        await createTurnRow(client, schema, s, t, historyTime(base, step));
        for (const w of t.writes) {
          await executeWrite(client, w, { schema, session: s.session, task: s.task, turn: t.id, at: historyTime(base, ++step), inTransaction: true });
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
   * Writer 0 names its execution through the transaction-local setting (docs/integration.md), as a host that knows
   * its executions would. Default true.
   */
  executionIds?: boolean;
  onProgress?: (done: number, total: number) => void;
}

/** Replays the live sessions from concurrent writers, each write as kandev makes it. Returns writes made. */
export async function replayLive(pool: pg.Pool, schema: string, plan: TrafficPlan, opts: ReplayOptions = {}): Promise<number> {
  const sessions = plan.sessions.filter((s) => !s.history);
  const writers = Math.max(1, Math.min(opts.writers ?? 4, sessions.length));
  const total = writeCount(sessions);
  let done = 0;
  await Promise.all([...Array(writers).keys()].map(async (w) => {
    const client = await pool.connect();
    try {
      for (const s of sessions.filter((_, i) => i % writers === w)) {
        await createSessionRows(client, schema, s, null);
        const executionId = w === 0 && opts.executionIds !== false ? `exec-${s.session}` : undefined;
        for (const t of s.turns) {
          await createTurnRow(client, schema, s, t, null);
          for (const write of t.writes) {
            await executeWrite(client, write, { schema, session: s.session, task: s.task, turn: t.id, executionId });
            done++;  // counted whether or not anyone listens: the return value is this count
            opts.onProgress?.(done, total);
          }
        }
        if (s.abandoned) await deleteSession(client, schema, s.session);
      }
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
    for (const t of s.turns) {
      for (const x of t.writes) {
        if (x.op === 'complete_pending') n += x.qualifying;
        else if (x.qualifies && !x.noIdentity) n++;
      }
    }
  });
  return n;
}
