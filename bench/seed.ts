// Set-based seeding (generate_series): stores of any size are built inside the database, never row by
// row from Node. Message i belongs to turn i/10 and session i/200 and was created at base + i seconds;
// every 4th message is a subagent call (25%), the rest are shell tool calls and plain text messages.
import type pg from 'pg';

export const MESSAGES_PER_TURN = 10;
export const MESSAGES_PER_SESSION = 200;
export const SEED_BASE = '2026-01-01 00:00:00';

/** Seeds messages [from, to) with their tasks, sessions and turns. Idempotent for the parents. */
export async function seedMessages(c: pg.Client, from: number, to: number): Promise<void> {
  const sFrom = Math.floor(from / MESSAGES_PER_SESSION);
  const sTo = Math.floor((to - 1) / MESSAGES_PER_SESSION);
  const tFrom = Math.floor(from / MESSAGES_PER_TURN);
  const tTo = Math.floor((to - 1) / MESSAGES_PER_TURN);
  const per = MESSAGES_PER_SESSION / MESSAGES_PER_TURN;
  await c.query(`INSERT INTO tasks (id, title, created_at, updated_at)
    SELECT 'task-' || s, 'task ' || s, $3::timestamp, $3::timestamp FROM generate_series($1::int, $2::int) s
    ON CONFLICT DO NOTHING`, [sFrom, sTo, SEED_BASE]);
  await c.query(`INSERT INTO task_sessions (id, task_id, started_at, updated_at)
    SELECT 'ses-' || s, 'task-' || s, $3::timestamp, $3::timestamp FROM generate_series($1::int, $2::int) s
    ON CONFLICT DO NOTHING`, [sFrom, sTo, SEED_BASE]);
  await c.query(`INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
    SELECT 'turn-' || t, 'ses-' || (t / $4), 'task-' || (t / $4), $3::timestamp, $3::timestamp, $3::timestamp
      FROM generate_series($1::int, $2::int) t
    ON CONFLICT DO NOTHING`, [tFrom, tTo, SEED_BASE, per]);
  // Subagent calls follow the measured shape: 75% async_launched (no usage), ~20% completed with
  // usage, the rest started (OpenCode, child session only).
  await c.query(`INSERT INTO task_session_messages
      (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
    SELECT 'msg-' || i, 'ses-' || (i / ${MESSAGES_PER_SESSION}), 'task-' || (i / ${MESSAGES_PER_SESSION}),
           'turn-' || (i / ${MESSAGES_PER_TURN}), 'agent',
           CASE WHEN i % 4 >= 2 THEN repeat('streamed agent text ', 8 + i % 16) ELSE '' END,
           CASE WHEN i % 4 >= 2 THEN 'message' ELSE 'tool_call' END,
           CASE i % 4
             WHEN 0 THEN jsonb_build_object(
               'tool_call_id', 'toolu_' || i, 'title', 'Task',
               'status', CASE WHEN (i / 4) % 20 = 19 THEN 'in_progress' ELSE 'completed' END,
               'normalized', jsonb_build_object('kind', 'subagent_task', 'subagent_task',
                 jsonb_build_object('description', 'subagent task ' || i,
                   'prompt', repeat('review the change and report findings ', 6),
                   'subagent_type', (ARRAY['security-reviewer','test-writer','explorer','general-purpose'])[1 + i % 4])
                 || CASE WHEN (i / 4) % 20 < 15 THEN
                      jsonb_build_object('status', 'async_launched', 'agent_id', 'a' || i, 'is_async', true)
                    WHEN (i / 4) % 20 < 19 THEN
                      jsonb_build_object('status', 'completed', 'agent_id', 'a' || i, 'model', 'claude-opus-5[1m]',
                        'total_tokens', 1000 + i % 275000, 'tool_use_count', i % 40, 'duration_ms', 5000 + i % 90000)
                    ELSE jsonb_build_object('status', 'started', 'child_session_id', 'ses_' || i) END))::text
             WHEN 1 THEN jsonb_build_object(
               'tool_call_id', 'toolu_sh_' || i, 'title', 'Bash', 'status', 'completed',
               'normalized', jsonb_build_object('kind', 'shell_exec', 'shell_exec',
                 jsonb_build_object('command', 'npm test', 'output', repeat('ok ', 20))))::text
             ELSE '{}' END,
           $3::timestamp + i * interval '1 second', $3::timestamp + i * interval '1 second' + interval '5 seconds'
      FROM generate_series($1::int, $2::int) i`, [from, to - 1, SEED_BASE]);
}

/** Sessions and turns that the live writers of the benchmarks write into (writer w, turn k). */
export async function seedLiveTurns(c: pg.Client, writers: number, turns: number): Promise<void> {
  await c.query(`INSERT INTO tasks (id, title, created_at, updated_at)
    SELECT 'live-task-' || w, 'live', $2::timestamp, $2::timestamp FROM generate_series(0, $1::int - 1) w`, [writers, SEED_BASE]);
  await c.query(`INSERT INTO task_sessions (id, task_id, started_at, updated_at)
    SELECT 'live-ses-' || w, 'live-task-' || w, $2::timestamp, $2::timestamp FROM generate_series(0, $1::int - 1) w`, [writers, SEED_BASE]);
  await c.query(`INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
    SELECT 'live-turn-' || w || '-' || k, 'live-ses-' || w, 'live-task-' || w, $3::timestamp, $3::timestamp, $3::timestamp
      FROM generate_series(0, $1::int - 1) w, generate_series(0, $2::int - 1) k`, [writers, turns, SEED_BASE]);
}
