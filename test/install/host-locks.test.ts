// DDL on kandev's tables never queues kandev (docs/reliability.md#locks). One session idle in a
// transaction (a writer for `up`, a mere reader for `uninstall`) used to make every writer wait behind
// our lock request for as long as it stayed idle. Now each try waits at most subagent_context.lock_timeout
// (1 s), backs off, and after its tries the command stops with one sentence naming that session.
import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, insertMessage } from '../../kandev/host.js';

const cli = builtCli();

/**
 * Four kandev writers writing until stopped: their worst latency, and how many writes failed. Each waits at
 * most 1.5 s for a lock (lock_timeout, measured by the server: a loaded machine's delays in this process or
 * in getting the CPU do not count) and 3 s in all, so `failed` 0 says no write was queued behind our lock
 * request longer than about a second, whatever else the machine runs.
 */
async function writers(db: Awaited<ReturnType<typeof freshDatabase>>, key: string) {
  const t = await createTurn(db.pool, 'public', key);
  const clients: pg.Client[] = [];
  for (let i = 0; i < 4; i++) {
    const c = await db.connect();
    await c.query(`SET statement_timeout = '3s'; SET lock_timeout = '1500ms'`);
    clients.push(c);
  }
  let stop = false;
  let worst = 0;
  let failed = 0;
  let writes = 0;
  const loops = clients.map(async (c, w) => {
    for (let n = 0; !stop; n++) {
      const t0 = performance.now();
      try {
        await insertMessage(c, 'public', { id: `${key}-${w}-${n}`, session: t.session, task: t.task, turn: t.turn, metadata: '{"kind":"message"}' });
        writes++;
      } catch {
        failed++;
      }
      worst = Math.max(worst, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
  });
  return { stop: async () => { stop = true; await Promise.all(loops); return { worst, failed, writes }; } };
}

describe('`up` with a writer idle in its transaction', async () => {
  const db = await freshDatabase('host_locks_up', { from: 'host' });
  it('holds no writer more than about a second, stops naming that session, and installs once it ends', async () => {
    // Only the idle session may hold what up waits for here: an autovacuum of kandev's tables (its lock
    // conflicts too, and a loaded machine starts one) would be named instead.
    for (const table of ['task_sessions', 'task_session_messages']) await db.query(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
    const t = await createTurn(db.pool, 'public', 'idle');
    const idle = await db.connect();
    const { rows: [{ pid }] } = await idle.query(`SELECT pg_backend_pid() AS pid`);
    await idle.query('BEGIN');
    await insertMessage(idle, 'public', { id: 'idle-1', session: t.session, task: t.task, turn: t.turn, metadata: '{"kind":"message"}' });

    const w = await writers(db, 'up');
    const r = await runCli(cli, ['up', '--database-url', db.url]);
    const seen = await w.stop();
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(new RegExp(`task_session_messages is held by a long transaction \\(pid ${pid} \\(postgres for [0-9:]+, idle in transaction: INSERT INTO`));
    expect(r.stderr).toMatch(/nothing was changed/);
    expect(seen.failed).toBe(0);
    expect(seen.writes).toBeGreaterThan(20);
    expect(seen.worst).toBeLessThan(3000);  // the wall clock, with a loaded machine's slack: not the 10 s and more it was
    expect((await db.query(`SELECT to_regclass('public.task_session_subagents') AS t`)).rows[0].t).toBeNull();

    await idle.query('COMMIT');
    const again = await runCli(cli, ['up', '--database-url', db.url]);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
  }, 120_000);
});

describe('`uninstall` with a reader idle in its transaction', async () => {
  const db = await freshDatabase('host_locks_uninstall', { from: 'installed' });
  it('holds no reader or writer more than about a second, stops naming that session, and uninstalls once it ends', async () => {
    const idle = await db.connect();
    const { rows: [{ pid }] } = await idle.query(`SELECT pg_backend_pid() AS pid`);
    await idle.query('BEGIN');
    await idle.query('SELECT count(*) FROM task_session_messages');

    const w = await writers(db, 'uninstall');
    const r = await runCli(cli, ['uninstall', '--database-url', db.url]);
    const seen = await w.stop();
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(new RegExp(`held by a long transaction \\(pid ${pid} \\(postgres for [0-9:]+, idle in transaction: SELECT count`));
    expect(seen.failed).toBe(0);
    expect(seen.worst).toBeLessThan(3000);  // the wall clock, with a loaded machine's slack: not the 10 s and more it was
    expect((await db.query(`SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = 'subagent_context_capture'`)).rows[0].n).toBe(1);

    await idle.query('COMMIT');
    const again = await runCli(cli, ['uninstall', '--database-url', db.url]);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
  }, 120_000);
});

describe('`up` as a role that may not see the holder\'s session', async () => {
  const db = await freshDatabase('host_locks_hidden', { from: 'host' });
  const role = `sc_lock_owner_${randomBytes(3).toString('hex')}`;
  await db.query(`CREATE ROLE ${role} LOGIN; CREATE SCHEMA owned AUTHORIZATION ${role}`);
  await db.createHost('owned');
  for (const table of ['kandev_meta', 'tasks', 'task_sessions', 'task_session_turns', 'task_session_messages']) {
    await db.query(`ALTER TABLE owned.${table} OWNER TO ${role}; ALTER TABLE owned.${table} SET (autovacuum_enabled = off)`);
  }
  afterAll(async () => { await db.query(`DROP SCHEMA owned CASCADE; DROP OWNED BY ${role}; DROP ROLE ${role}`); });

  it('names the pid and role it can see, and how to see what that session runs (not "?, ?: <insufficient privilege>")', async () => {
    const t = await createTurn(db.pool, 'owned', 'idle');
    const idle = await db.connect();  // the superuser: its activity is hidden from an ordinary role
    const { rows: [{ pid }] } = await idle.query(`SELECT pg_backend_pid() AS pid`);
    await idle.query('BEGIN');
    await insertMessage(idle, 'owned', { id: 'idle-1', session: t.session, task: t.task, turn: t.turn, metadata: '{"kind":"message"}' });
    const u = new URL(db.url);
    u.username = role;
    u.password = '';
    try {
      const r = await runCli(cli, ['up', '--schema', 'owned'], { DATABASE_URL: u.toString(),
        PGOPTIONS: '-c subagent_context.lock_tries=1 -c subagent_context.lock_timeout=200ms' });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`is held by a long transaction (pid ${pid} (role ${new URL(db.url).username || 'postgres'}; what it runs is hidden ` +
        `from role ${role}: a superuser sees it, or GRANT pg_read_all_stats TO ${role})`);
      expect(r.stderr).not.toContain('<insufficient privilege>');
    } finally {
      await idle.query('ROLLBACK');
      await idle.end();
    }
  }, 120_000);
});

describe('the two lock tunables, bounded', async () => {
  const db = await freshDatabase('host_locks_tunables', { from: 'host' });
  it.each([
    ['subagent_context.lock_tries=0', 'subagent_context.lock_tries must be a whole number from 1 to 100, got "0"'],
    ['subagent_context.lock_tries=lots', 'subagent_context.lock_tries must be a whole number from 1 to 100, got "lots"'],
    ['subagent_context.lock_timeout=0', 'subagent_context.lock_timeout must be a duration from 10ms to 60s, got "0"'],
    ['subagent_context.lock_timeout=soon', 'subagent_context.lock_timeout must be a duration from 10ms to 60s, got "soon"'],
    ['subagent_context.lock_timeout=2min', 'subagent_context.lock_timeout must be a duration from 10ms to 60s, got "2min"'],
  ])('%s: `up` refuses in one sentence, before any lock, and installs nothing', async (option, sentence) => {
    const r = await runCli(cli, ['up'], { DATABASE_URL: db.url, PGOPTIONS: `-c ${option}` });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(sentence);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect((await db.query(`SELECT to_regclass('public.task_session_subagents') AS t`)).rows).toEqual([{ t: null }]);
  });
});

describe('`up` beside another database cloned from the same template', async () => {
  // Tables of the same OIDs: pg_locks lists every database's locks, so a session there that holds its own
  // task_session_messages must not be named here (in a full test run it was, beside the real holder).
  const db = await freshDatabase('host_locks_here', { from: 'host' });
  const other = await freshDatabase('host_locks_there', { from: 'host' });
  it('names the holder in its own database only', async () => {
    const ids = async (d: typeof db) => (await d.query(`SELECT 'public.task_session_messages'::regclass::oid AS oid`)).rows[0].oid;
    expect(await ids(other)).toBe(await ids(db));
    const hold = async (d: typeof db) => {
      const t = await createTurn(d.pool, 'public', 'clone');
      const c = await d.connect();
      const { rows: [{ pid }] } = await c.query(`SELECT pg_backend_pid() AS pid`);
      await c.query('BEGIN');
      await insertMessage(c, 'public', { id: 'clone-1', session: t.session, task: t.task, turn: t.turn, metadata: '{"kind":"message"}' });
      return { pid: pid as number, c };
    };
    const here = await hold(db);
    const there = await hold(other);
    try {
      const r = await runCli(cli, ['up', '--database-url', db.url],
        { PGOPTIONS: '-c subagent_context.lock_tries=1 -c subagent_context.lock_timeout=300ms' });
      expect(r.code).toBe(3);
      expect([...r.stderr.matchAll(/pid (\d+)/g)].map((m) => Number(m[1])), r.stderr).toEqual([here.pid]);
      expect(r.stderr).not.toContain(String(there.pid));
    } finally {
      await here.c.query('ROLLBACK');
      await there.c.query('ROLLBACK');
    }
  }, 120_000);
});
