// Crash safety: SIGKILL the whole PostgreSQL server (postmaster and every backend, as an OOM kill or a
// power cut of the instance would) in the middle of the backfill of a large store and in the middle of
// concurrent capture, restart it on the same data directory (crash recovery replays the WAL), and check
// that nothing is half-written: no activation key without its rows, no row without a committed
// message, no committed message without its row, and health says exactly that.
//
// It needs a server it may kill, so it starts its own embedded one: the major of the suite's server
// when that is 15-18 (so the system-15 CI run crashes a 15), else PG_VERSION / the default.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { EmbeddedServer } from '../../demo/embedded.js';
import { createHostTables, createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { HISTORY_ROWS } from '../../kandev/subagent-row.js';
import { backfill, migrate, up } from '../../src/install.js';
import { startOwnServer, urlFor } from '../helpers/database.js';
import { MIGRATIONS } from '../helpers/migrations.js';
import { captureTrigger } from '../helpers/catalog.js';
import { ROW_COLUMNS, selectList } from '../model/subagent-table.js';
import { utcTimestamp } from '../../src/timestamp.js';

pg.types.setTypeParser(1114, (v: string) => v);
pg.types.setTypeParser(20, (v: string) => BigInt(v));

const HISTORY_SESSIONS = 400;
const HISTORY_CALLS_PER_SESSION = 100;   // 40,000 subagent calls ...
const HISTORY_NOISE_PER_SESSION = 50;    // ... among 20,000 ordinary messages

let server: EmbeddedServer;
let url: string;

async function connect(): Promise<pg.Client> {
  const c = new pg.Client(url);
  c.on('error', () => {});  // the server is killed under these connections on purpose
  await c.connect();
  return c;
}

async function withClient<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = await connect();
  try { return await fn(c); } finally { await c.end().catch(() => {}); }
}

/** Kills the server (SIGKILL to postmaster and backends), then restarts it on the same data directory. */
async function crashAndRestart() {
  const before = server.pid;
  await server.kill('SIGKILL');
  await server.restart();
  expect(server.pid).not.toBe(before);
}

beforeAll(async () => {
  server = await startOwnServer();
  url = server.url;
}, 180_000);

afterAll(async () => { await server?.stop(); });

/** The columns derivation decides, for comparing stored rows with a re-derivation from history. */
const DERIVED = selectList(ROW_COLUMNS.filter((c) => c !== 'agent_execution_id' && c !== 'source'));

/** Stored rows that history does not derive, and derived rows that are not stored (both must be 0). */
async function disagreement(c: pg.Client) {
  const { rows } = await c.query(`
    WITH derived AS (SELECT ${DERIVED} FROM ${HISTORY_ROWS} AS h),
         stored AS (SELECT ${DERIVED} FROM task_session_subagents)
    SELECT (SELECT count(*) FROM (SELECT * FROM stored EXCEPT SELECT * FROM derived) x) AS stored_not_derived,
           (SELECT count(*) FROM (SELECT * FROM derived EXCEPT SELECT * FROM stored) y) AS derived_not_stored,
           (SELECT count(*) FROM stored) AS stored`);
  return rows[0];
}

async function keys(c: pg.Client) {
  const { rows } = await c.query(`SELECT key, value FROM kandev_meta WHERE key LIKE 'subagent_context%' ORDER BY key`);
  return rows;
}

describe('SIGKILL in the middle of the backfill of a large store', () => {
  const db = 'crash_backfill';
  it('leaves no key and only whole committed batches; the next `up` continues, with every row once and a clean health', async () => {
    await withClient(async (c) => { await c.query(`CREATE DATABASE ${db}`); });
    url = urlFor(server.url, db);
    await withClient(async (c) => {
      await createHostTables(c, 'public');
      await c.query(`
        INSERT INTO tasks SELECT 'task-' || s, 't', '2026-08-01', '2026-08-01' FROM generate_series(1, $1) s;
        INSERT INTO task_sessions SELECT 'session-' || s, 'task-' || s, '2026-08-01', '2026-08-01' FROM generate_series(1, $1) s;
        INSERT INTO task_session_turns SELECT 'turn-' || s, 'session-' || s, 'task-' || s, '2026-08-01', '2026-08-01', '2026-08-01'
          FROM generate_series(1, $1) s;`.replaceAll('$1', String(HISTORY_SESSIONS)));
      await c.query(`
        INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
        SELECT 'msg-' || s || '-' || i, 'session-' || s, 'task-' || s, 'turn-' || s, 'agent', '', 'tool_call',
               json_build_object('tool_call_id', 'toolu_' || s || '_' || i, 'title', 'Task',
                 'status', CASE WHEN i % 4 = 0 THEN 'pending' ELSE 'completed' END,
                 'normalized', json_build_object('kind', 'subagent_task', 'subagent_task',
                   json_build_object('subagent_type', 'explorer', 'status', 'completed', 'total_tokens', s * 1000 + i)))::text,
               timestamp '2026-08-01' + make_interval(secs => s * 1000 + i),
               timestamp '2026-08-01' + make_interval(secs => s * 1000 + i + 5)
          FROM generate_series(1, ${HISTORY_SESSIONS}) s, generate_series(1, ${HISTORY_CALLS_PER_SESSION}) i;
        INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, metadata, created_at, updated_at)
        SELECT 'note-' || s || '-' || i, 'session-' || s, 'task-' || s, 'turn-' || s, 'hello', '{"kind":"message"}',
               timestamp '2026-08-01', timestamp '2026-08-01'
          FROM generate_series(1, ${HISTORY_SESSIONS}) s, generate_series(1, ${HISTORY_NOISE_PER_SESSION}) i;`);
      // Install only: the trigger, no activation yet (the activation migration is the backfill).
      await migrate(c, 'public', 'up', 1);
    });

    // Two kill points, each made exact by a row another transaction holds uncommitted:
    //  - mid-insert: a history row's key, so the backfill's INSERT waits on it part-way through;
    //  - before the keys: the capture_since key, so it waits after storing every history row.
    const holds: Array<[string, string]> = [
      ['mid-insert', `INSERT INTO task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id, observed_at, updated_at)
                      VALUES ('held', 'session-${HISTORY_SESSIONS / 2}', 'task-${HISTORY_SESSIONS / 2}', 'toolu_${HISTORY_SESSIONS / 2}_50', 'unknown', '2026-08-01', '2026-08-01')`],
      ['before the keys', `INSERT INTO kandev_meta (key, value) VALUES ('subagent_context_capture_since', 'held')`],
    ];
    for (const [point, hold] of holds) {
      const holder = await connect();
      await holder.query(`BEGIN; ${hold}`);
      const runner = await connect();
      const running = backfill(runner, 'public').then(() => 'finished', (e: Error) => `error: ${e.message}`);
      const watcher = await connect();
      for (;;) {
        const { rows } = await watcher.query(`SELECT count(*) AS n FROM pg_stat_activity
          WHERE query LIKE '%subagent_context_backfill_step(%' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`);
        if (rows[0].n === 1n) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      await crashAndRestart();
      expect(await running, point).toMatch(/^error: /);
      await withClient(async (c) => {
        expect(await keys(c), point).toEqual([]);
        // The backfill commits batch by batch (docs/reliability.md#backfill): what a kill leaves is the
        // batches before the one it interrupted, and where the walk stood, never a key.
        const { rows: [{ n, recorded }] } = await c.query(`SELECT (SELECT count(*) FROM task_session_subagents) AS n,
          (SELECT inserted FROM subagent_context_backfill_progress) AS recorded`);
        // (Before the keys, every batch may have committed: the last one can find nothing more to store.)
        expect(n, point).toBeLessThanOrEqual(BigInt(HISTORY_SESSIONS * HISTORY_CALLS_PER_SESSION));
        if (point === 'mid-insert') expect(n, point).toBeLessThan(BigInt(HISTORY_SESSIONS * HISTORY_CALLS_PER_SESSION));
        expect(recorded ?? 0n, point).toBe(n);
        expect((await c.query(`SELECT activated, shortfall FROM subagent_context_health()`)).rows[0], point)
          .toEqual({ activated: false, shortfall: null });
      });
    }

    await withClient(async (c) => {
      const result = await up(c, 'public');
      // A resumed backfill reports what it stored and, apart, what the killed runs had committed.
      expect(result.backfill).toMatchObject({ status: 'activated' });
      expect(Number(result.backfill.inserted) + Number(result.backfill.inserted_before ?? 0)).toBe(HISTORY_SESSIONS * HISTORY_CALLS_PER_SESSION);
      expect((await keys(c)).map((k) => k.key)).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
      expect(await disagreement(c)).toEqual({
        stored_not_derived: 0n, derived_not_stored: 0n, stored: BigInt(HISTORY_SESSIONS * HISTORY_CALLS_PER_SESSION) });
      expect((await c.query(`SELECT activated, shortfall, excess, trigger_enabled FROM subagent_context_health()`)).rows[0])
        .toEqual({ activated: true, shortfall: 0n, excess: 0n, trigger_enabled: true });
    });
  }, 240_000);
});

describe('SIGKILL in the middle of installation', () => {
  it('leaves nothing installed and no migration recorded; the next `up` installs and activates', async () => {
    url = urlFor(server.url, 'postgres');
    await withClient(async (c) => { await c.query(`CREATE DATABASE crash_install`); });
    url = urlFor(server.url, 'crash_install');
    await withClient(async (c) => { await createHostTables(c, 'public'); });
    // A message writer's lock on task_session_messages: the install transaction creates the table, then
    // waits for that lock at its first DDL on kandev's table (an index or the trigger). We kill it there.
    const writer = await connect();
    await writer.query(`BEGIN; LOCK TABLE task_session_messages IN ROW EXCLUSIVE MODE`);
    const installer = await connect();
    const { rows: [{ pid }] } = await installer.query(`SELECT pg_backend_pid() AS pid`);
    const running = up(installer, 'public').then(() => 'finished', (e: Error) => `error: ${e.message}`);
    const watcher = await connect();
    for (;;) {
      const { rows } = await watcher.query(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [pid]);
      if (rows[0]?.wait_event_type === 'Lock') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await crashAndRestart();
    expect(await running).toMatch(/^error: /);

    await withClient(async (c) => {
      const { rows: [left] } = await c.query(`
        SELECT to_regclass('public.task_session_subagents') IS NOT NULL AS subagent_table,
               to_regclass('public.subagent_context_failures') IS NOT NULL AS failures_table,
               (SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace) AS functions,
               (SELECT count(*) FROM kandev_meta WHERE key LIKE 'subagent_context%') AS keys`);
      expect(left).toEqual({ subagent_table: false, failures_table: false, functions: 0n, keys: 0n });
      expect(await captureTrigger(c, 'public')).toBeNull();
      const recorded = await c.query(`SELECT name FROM public.subagent_context_migrations`).then((r) => r.rows, () => []);
      expect(recorded).toEqual([]);

      const result = await up(c, 'public');
      expect(result.applied).toEqual(MIGRATIONS);
      expect(result.backfill.status).toBe('activated');
      expect((await c.query(`SELECT activated, shortfall, trigger_enabled FROM subagent_context_health()`)).rows[0])
        .toEqual({ activated: true, shortfall: 0n, trigger_enabled: true });
    });
  }, 240_000);
});

describe('SIGKILL in the middle of concurrent capture', () => {
  const db = 'crash_capture';
  const WRITERS = 8;
  const KILL_AFTER_COMMITS = 400;

  it('every acknowledged commit has its message and exactly its row; nothing of the interrupted ones; health clean', async () => {
    url = urlFor(server.url, 'postgres');
    await withClient(async (c) => { await c.query(`CREATE DATABASE ${db}`); });
    url = urlFor(server.url, db);
    const keysBefore = await withClient(async (c) => {
      await createHostTables(c, 'public');
      await up(c, 'public');
      return keys(c);
    });

    // Each writer: one subagent call per loop, as kandev writes it (INSERT pending, UPDATE running with
    // usage, UPDATE completed). Even writers wrap the three frames in one transaction; odd writers
    // commit each frame on its own. Frames only ever add information, so the stored row must equal a
    // re-derivation from the message as it stands.
    const acknowledged = new Set<string>();  // calls whose final frame's COMMIT returned
    let commits = 0;
    let killing: Promise<void> | undefined;
    const now = () => utcTimestamp();
    async function writer(w: number) {
      const c = await connect();
      try {
        for (let i = 0; ; i++) {
          const key = `w${w}_${i}`;
          const call = `toolu_${key}`;
          const txn = w % 2 === 0;
          if (txn) await c.query('BEGIN');
          const t = await createTurn(c, 'public', key, now());
          await insertMessage(c, 'public', { id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn,
            created_at: now(), metadata: subagentMetadata({ tool_call_id: call, status: 'pending',
              subagent: { subagent_type: 'explorer', description: key, status: 'async_launched', is_async: true } }) });
          await updateMessage(c, 'public', `msg-${key}`, subagentMetadata({ tool_call_id: call, status: 'in_progress',
            subagent: { subagent_type: 'explorer', description: key, status: 'running', is_async: true, total_tokens: 10 + i } }), now());
          await updateMessage(c, 'public', `msg-${key}`, subagentMetadata({ tool_call_id: call, status: 'completed',
            subagent: { subagent_type: 'explorer', description: key, status: 'completed', is_async: true,
              total_tokens: 100 + i, tool_use_count: i % 3, duration_ms: 1000 + i } }), now());
          if (txn) await c.query('COMMIT');
          acknowledged.add(call);
          if (++commits === KILL_AFTER_COMMITS) killing = server.kill('SIGKILL');
        }
      } catch {
        // the server went away under us: expected
      } finally {
        await c.end().catch(() => {});
      }
    }
    const killedPid = server.pid;
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    expect(killing).toBeDefined();
    await killing;
    await server.restart();
    expect(server.pid).not.toBe(killedPid);

    await withClient(async (c) => {
      expect(await keys(c)).toEqual(keysBefore);
      // Every call whose final COMMIT was acknowledged survived with its completed row.
      const { rows } = await c.query(
        `SELECT tool_call_id, tool_status, agent_status FROM task_session_subagents WHERE tool_call_id = ANY($1)`,
        [[...acknowledged]]);
      expect(rows.length).toBe(acknowledged.size);
      expect(rows.every((r) => r.tool_status === 'completed' && r.agent_status === 'completed')).toBe(true);
      // Whatever else committed (odd writers' single frames), rows and messages agree exactly: no row
      // without a committed message, no committed message without its row, no value half-merged.
      const d = await disagreement(c);
      expect(d.stored_not_derived).toBe(0n);
      expect(d.derived_not_stored).toBe(0n);
      expect(d.stored).toBeGreaterThanOrEqual(BigInt(acknowledged.size));
      // The interrupted transactions left nothing: every session has a message (no orphan fixtures
      // from a half-done even-writer transaction), and every even writer's call is complete.
      const { rows: partial } = await c.query(`
        SELECT count(*) AS n FROM task_session_messages m
         WHERE m.id ~ '^msg-w[0-9]*[02468]_' AND m.metadata::jsonb ->> 'status' <> 'completed'`);
      expect(partial[0].n).toBe(0n);
      expect((await c.query(`SELECT activated, shortfall, excess, trigger_enabled, failures FROM subagent_context_health()`)).rows[0])
        .toEqual({ activated: true, shortfall: 0n, excess: 0n, trigger_enabled: true, failures: 0n });
      expect((await up(c, 'public')).backfill.status).toBe('already activated');

      // Capture works after recovery.
      const t = await createTurn(c, 'public', 'after');
      await insertMessage(c, 'public', { id: 'msg-after', session: t.session, task: t.task, turn: t.turn,
        metadata: subagentMetadata({ tool_call_id: 'toolu_after', status: 'completed', subagent: { total_tokens: 7 } }) });
      expect((await c.query(`SELECT total_tokens FROM task_session_subagents WHERE tool_call_id = 'toolu_after'`)).rows)
        .toEqual([{ total_tokens: 7n }]);
    });
  }, 240_000);
});
