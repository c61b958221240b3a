// A small kandev history whose report is known by hand (test/report/report.test.ts spells out every number):
// 3 cards, 4 sessions (card A has two; card C's session launched nothing), 4 turns, 8 subagents.
//
//   turn  session  subagent  status (agent/tool)         type        model  tokens tools  ms     parent
//   a1t1  A1       x1        completed/completed         Explore     m1     1000   0      2000   -
//   a1t1  A1       x2        async_launched/completed    Explore     -      -      -      -      -
//   a1t1  A1       x3        async_launched/completed    Explore     -      -      -      -      x1
//   a1t1  A1       x4        async_launched/in_progress  Explore     -      -      -      -      x3
//   a2t1  A2       y1        completed/completed         (missing)   m1     3000   5      4000   -   (history: backfilled)
//   b1t1  B1       z1        started/in_progress         general     -      -      -      -      -   (OpenCode)
//   b1t1  B1       z2        (absent)/completed          general     -      -      -      -      toolu_gone (not captured)
//   b1t2  B1       w1        completed/completed         Explore     m2     500    0      -      -
//
// Live messages are created on 2099-01-01 (after activation); seconds from creation to the terminal
// frame: x1 10, x2 2, x3 4, y1 20, z2 6, w1 8.
import type { TestDatabase } from './database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import type pg from 'pg';

export interface SeedResult {
  /** Qualifying message writes made after installation (what the capture stats count as attempted). */
  liveQualifyingWrites: number;
}

export const TASK_B_TITLE = 'Migrate the billing pipeline to the new ledger service, with a dry run first';

const at = (s: number) => `2099-01-01 00:00:${String(s).padStart(2, '0')}`;

export async function seedReportFixture(db: TestDatabase, schema = 'public'): Promise<SeedResult> {
  await db.createHost(schema);
  const c: pg.Client = await db.connect();
  const A1 = await createTurn(c, schema, 'a1t1');
  // Card A's second session, and card B's and C's sessions, on their own turns.
  const turn = async (task: string, session: string, turnId: string) => {
    const s = `"${schema}"`;
    await c.query(`INSERT INTO ${s}.tasks (id, title, created_at, updated_at) VALUES ($1, $1, '2026-08-12', '2026-08-12') ON CONFLICT DO NOTHING`, [task]);
    await c.query(`INSERT INTO ${s}.task_sessions (id, task_id, started_at, updated_at) VALUES ($1, $2, '2026-08-12', '2026-08-12') ON CONFLICT DO NOTHING`, [session, task]);
    await c.query(`INSERT INTO ${s}.task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ($1, $2, $3, '2026-08-12', '2026-08-12', '2026-08-12')`, [turnId, session, task]);
    return { task, session, turn: turnId };
  };
  const A2 = await turn(A1.task, 'session-a2', 'a2t1');
  const B1 = await turn('task-b', 'session-b1', 'b1t1');
  const B1t2 = { ...B1, turn: 'b1t2' };
  await c.query(`INSERT INTO "${schema}".task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ('b1t2', $1, $2, '2026-08-12', '2026-08-12', '2026-08-12')`, [B1.session, B1.task]);
  await turn('task-c', 'session-c1', 'c1t1');
  // Card B has a title as long as real ones get: the terminal report must clip it, not wrap the table.
  await c.query(`UPDATE "${schema}".tasks SET title = $1 WHERE id = 'task-b'`, [TASK_B_TITLE]);

  // History: y1, written before installation, already finished.
  await insertMessage(c, schema, { id: 'm-y1', session: A2.session, task: A2.task, turn: A2.turn,
    created_at: '2026-08-12 09:00:00', updated_at: '2026-08-12 09:00:20',
    metadata: subagentMetadata({ tool_call_id: 'y1', status: 'completed',
      subagent: { status: 'completed', model: 'm1', total_tokens: 3000, tool_use_count: 5, duration_ms: 4000 } }) });

  await db.up(schema);

  let writes = 0;
  const ins = async (id: string, t: { session: string; task: string; turn: string }, s: number, meta: string) => {
    writes++;
    await insertMessage(c, schema, { id, session: t.session, task: t.task, turn: t.turn, created_at: at(s), metadata: meta });
  };
  const upd = async (id: string, s: number, meta: string) => { writes++; await updateMessage(c, schema, id, meta, at(s)); };

  const explore = (extra: Record<string, unknown>) => ({ subagent_type: 'Explore', ...extra });
  const async_ = explore({ status: 'async_launched', is_async: true });
  // x1: completed with usage (tool_use_count 0 is a reported zero).
  await ins('m-x1', A1, 1, subagentMetadata({ tool_call_id: 'x1', status: 'pending', subagent: explore({}) }));
  await upd('m-x1', 11, subagentMetadata({ tool_call_id: 'x1', status: 'completed',
    subagent: explore({ status: 'completed', model: 'm1', total_tokens: 1000, tool_use_count: 0, duration_ms: 2000 }) }));
  // x2..x4: background launches; x3 nested under x1, x4 under x3 (still running).
  await ins('m-x2', A1, 2, subagentMetadata({ tool_call_id: 'x2', status: 'in_progress', subagent: async_ }));
  await upd('m-x2', 4, subagentMetadata({ tool_call_id: 'x2', status: 'completed', subagent: async_ }));
  await ins('m-x3', A1, 3, subagentMetadata({ tool_call_id: 'x3', parent_tool_call_id: 'x1', status: 'in_progress', subagent: async_ }));
  await upd('m-x3', 7, subagentMetadata({ tool_call_id: 'x3', parent_tool_call_id: 'x1', status: 'completed', subagent: async_ }));
  await ins('m-x4', A1, 5, subagentMetadata({ tool_call_id: 'x4', parent_tool_call_id: 'x3', status: 'in_progress', subagent: async_ }));
  // z1: OpenCode child, still running; z2: its parent was never captured, no agent status.
  await ins('m-z1', B1, 6, subagentMetadata({ tool_call_id: 'z1', status: 'in_progress',
    subagent: { subagent_type: 'general', status: 'started', child_session_id: 'ses_z1' } }));
  await ins('m-z2', B1, 8, subagentMetadata({ tool_call_id: 'z2', parent_tool_call_id: 'toolu_gone', status: 'pending', subagent: { subagent_type: 'general' } }));
  await upd('m-z2', 14, subagentMetadata({ tool_call_id: 'z2', parent_tool_call_id: 'toolu_gone', status: 'completed', subagent: { subagent_type: 'general' } }));
  // w1: completed with tokens and a zero tool count, but no duration reported.
  await ins('m-w1', B1t2, 9, subagentMetadata({ tool_call_id: 'w1', status: 'pending', subagent: explore({}) }));
  await upd('m-w1', 17, subagentMetadata({ tool_call_id: 'w1', status: 'completed',
    subagent: explore({ status: 'completed', model: 'm2', total_tokens: 500, tool_use_count: 0 }) }));
  // Plain chat messages never qualify.
  await insertMessage(c, schema, { id: 'm-chat', session: B1.session, task: B1.task, turn: B1.turn, created_at: at(1), metadata: '{}', type: 'message' });
  return { liveQualifyingWrites: writes };
}

/** The report test/report/report.test.ts expects for the fixture (the JSON of `subagent-context report`). */
export function expectedReport(schema = 'public') {
  const cardA = { id: 'task-a1t1', task_id: 'task-a1t1', sessions: 2, subagents: 5, async: 3, turns: 2, total_tokens: 4000, usage_not_reported: 3, title: 'task-a1t1' };
  const cardB = { id: 'task-b', task_id: 'task-b', sessions: 1, subagents: 3, async: 0, turns: 2, total_tokens: 500, usage_not_reported: 2, title: TASK_B_TITLE };
  const sessionA1 = { id: 'session-a1t1', task_id: 'task-a1t1', subagents: 4, async: 3, turns: 1, total_tokens: 1000, usage_not_reported: 3, title: 'task-a1t1' };
  const sessionB1 = { id: 'session-b1', task_id: 'task-b', subagents: 3, async: 0, turns: 2, total_tokens: 500, usage_not_reported: 2, title: TASK_B_TITLE };
  const sessionA2 = { id: 'session-a2', task_id: 'task-a1t1', subagents: 1, async: 0, turns: 1, total_tokens: 3000, usage_not_reported: 0, title: 'task-a1t1' };
  const none = { total_tokens: null, avg_tokens: null, max_tokens: null, avg_duration_ms: null, max_duration_ms: null, avg_tool_uses: null };
  return {
    schema,
    overview: { subagents: 8, live: 7, backfill: 1, sessions: 3, turns: 4, usage_reported: 3, usage_not_reported: 5,
      subagent_type_missing: 1, total_tokens: 4500, max_tokens: 3000, unknown_execution: 8 },
    fanout_per_turn: [{ fanout: 1, turns: 2 }, { fanout: 2, turns: 1 }, { fanout: 4, turns: 1 }],
    sessions_and_cards: { cards: 3, sessions: 4, subagents: 8, sessions_with_subagents: 3, sessions_per_card: 1.33,
      subagents_per_session: 2, subagents_per_card: 2.67, contexts_per_card: 4, most_subagents_in_one_session: 4 },
    subagents_per_session: [{ subagents: 0, sessions: 1 }, { subagents: 1, sessions: 1 }, { subagents: 3, sessions: 1 }, { subagents: 4, sessions: 1 }],
    by_subagent_type: [
      { subagent_type: 'Explore', subagents: 5, async: 3, usage_reported: 2, usage_not_reported: 3, total_tokens: 1500,
        avg_tokens: 750, max_tokens: 1000, avg_duration_ms: 2000, max_duration_ms: 2000, avg_tool_uses: 0 },
      { subagent_type: 'general', subagents: 2, async: 0, usage_reported: 0, usage_not_reported: 2, ...none },
      { subagent_type: '(not reported)', subagents: 1, async: 0, usage_reported: 1, usage_not_reported: 0, total_tokens: 3000,
        avg_tokens: 3000, max_tokens: 3000, avg_duration_ms: 4000, max_duration_ms: 4000, avg_tool_uses: 5 },
    ],
    by_model: [
      { model: '(not reported)', subagents: 5, async: 3, usage_reported: 0, usage_not_reported: 5, ...none },
      { model: 'm1', subagents: 2, async: 0, usage_reported: 2, usage_not_reported: 0, total_tokens: 4000,
        avg_tokens: 2000, max_tokens: 3000, avg_duration_ms: 3000, max_duration_ms: 4000, avg_tool_uses: 2.5 },
      { model: 'm2', subagents: 1, async: 0, usage_reported: 1, usage_not_reported: 0, total_tokens: 500,
        avg_tokens: 500, max_tokens: 500, avg_duration_ms: null, max_duration_ms: null, avg_tool_uses: 0 },
    ],
    agent_status: [
      { agent_status: 'async_launched', subagents: 3, usage_reported: 0, model_reported: 0 },
      { agent_status: 'completed', subagents: 3, usage_reported: 3, model_reported: 3 },
      { agent_status: '(absent)', subagents: 1, usage_reported: 0, model_reported: 0 },
      { agent_status: 'started', subagents: 1, usage_reported: 0, model_reported: 0 },
    ],
    nesting: [{ depth: 0, subagents: 5 }, { depth: 1, subagents: 1 }, { depth: 2, subagents: 1 }, { depth: null, subagents: 1 }],
    // Sync settle times x1 10 s, y1 20 s, z2 6 s, w1 8 s: median 9 s. x2 and x3 are background launches
    // (their settle time is the launch's, left out). Reported durations: x1 2 s, y1 4 s: median 3 s.
    settlement: { settled: 6, settled_sync: 4, settled_async: 2, outstanding: 2, outstanding_async: 1,
      oldest_outstanding_since: '2099-01-01T00:00:05Z', median_seconds_to_settle_sync: 9, median_reported_run_seconds: 3, run_time_reported: 2 },
    // Card A: x1..x4 and y1 (tokens 1000 + 3000); card B: z1, z2, w1 (tokens 500). Card C launched nothing.
    top_cards: {
      by_subagents: [cardA, cardB],
      by_tokens: [cardA, cardB],
    },
    top_sessions: {
      by_subagents: [sessionA1, sessionB1, sessionA2],
      by_tokens: [sessionA2, sessionA1, sessionB1],
    },
    // The 90 days up to the newest subagent (2099-01-01): only that day launched any (y1's day, in 2026,
    // is outside them); x2, x3, x4 are the async ones, x1 and w1 reported tokens.
    trend_per_day: Array.from({ length: 90 }, (_, i) => {
      const day = new Date(Date.UTC(2099, 0, 1) - (89 - i) * 86_400_000).toISOString().slice(0, 10);
      return i === 89 ? { day, subagents: 7, async: 3, sessions: 2, total_tokens: 1500 } : { day, subagents: 0, async: 0, sessions: 0, total_tokens: null };
    }),
  };
}

/**
 * The whole report of the fixture as `report --json` gives it (expectedReport() plus the parts that
 * depend on the run: health, counters, identity, what is running), for tests of the renderers that need
 * no database.
 */
export function sampleReport(schema = 'public') {
  return {
    ...expectedReport(schema),
    database: { host: 'db.example', database: 'kandev', schema, server_port: 5432 },
    window: { since: null, until: null, first_observed: '2026-08-12T09:00:00Z', last_observed: '2099-01-01T00:00:09Z', as_of: '2026-12-04T12:00:00Z' },
    unavailable: {} as Record<string, string>,
    running: [
      { task_id: 'task-a1t1', title: 'task-a1t1', task_session_id: 'session-a1t1', tool_call_id: 'x4', subagent_type: 'Explore', model: null,
        agent_status: 'async_launched', tool_status: 'in_progress', async: true, observed_at: '2099-01-01T00:00:05Z', age_seconds: -100 },
      { task_id: 'task-b', title: TASK_B_TITLE, task_session_id: 'session-b1', tool_call_id: 'z1', subagent_type: 'general', model: null,
        agent_status: 'started', tool_status: 'in_progress', async: false, observed_at: '2099-01-01T00:00:06Z', age_seconds: -99 },
    ],
    health: { activated: true, capture_since: '2026-12-01T00:00:00.000000000Z', backfill_through: '2026-08-12T09:00:00.000000000Z',
      shortfall: 0, excess: 0, last_observed_at: '2099-01-01T00:00:09.000000Z', trigger_enabled: true, failures: 0, collisions: 0,
      status: 'healthy', installed_version: '0.2.0' },
    stats: { attempted: 12, skipped_no_identity: 0, persisted: 12, failed: 0, anomalous_value: 0, unknown_execution: 12 },
  };
}
