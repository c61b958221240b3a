// What the install transaction holds before its lock guard (sql/manifest.txt, docs/reliability.md#locks):
// nothing a writer waits for. The data and code layers run while kandev writes on; the lock on kandev's
// tables is taken by guards/lock-host.sql, within its bounded tries, right before the statements that need
// it (the foreign key of a first install, the trigger), so kandev's writes wait only for those and the
// commit. Until d787cf0 the guard came first, and on Citus kandev's writes waited 5.5-6.9 s while every
// function was created on every node; CREATE INDEX / ALTER TABLE ... IF NOT EXISTS of the data layer
// locked capture's tables, without a bound, even when there was nothing to create.
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { installStatements } from '#sql';
import { freshDatabase } from '../helpers/database.js';

/**
 * The locks this session holds that a writer (ROW EXCLUSIVE) would wait for, on what a writer locks: tables,
 * their indexes, sequences (not a row type's entry, which DROP TYPE locks and no writer does).
 */
async function lockingWriters(c: pg.Client): Promise<string[]> {
  const { rows } = await c.query<{ lock: string }>(
    `SELECT c.relname || ' ' || l.mode AS lock
       FROM pg_catalog.pg_locks AS l JOIN pg_catalog.pg_class AS c ON c.oid = l.relation
      WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation' AND l.granted AND c.relkind <> 'c'
        AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
        AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
      ORDER BY 1`);
  return rows.map((r) => r.lock);
}

/** Runs the install transaction up to its lock guard, returns what it holds there and after, rolls back. */
async function locksAroundTheGuard(db: Awaited<ReturnType<typeof freshDatabase>>) {
  const statements = installStatements('public');
  const guard = statements.findIndex((s) => s.includes('$lock_host$'));
  expect(guard).toBeGreaterThan(statements.length / 2);
  const c = await db.connect();
  await c.query('BEGIN');
  try {
    for (const s of statements.slice(0, guard)) await c.query(s);
    const before = await lockingWriters(c);
    for (const s of statements.slice(guard)) await c.query(s);
    return { before, after: await lockingWriters(c) };
  } finally {
    await c.query('ROLLBACK');
    await c.end();
  }
}

const installed = await freshDatabase('install_locks_upgrade', { from: 'installed' });
const host = await freshDatabase('install_locks_first', { from: 'host' });

describe('the install transaction, before its lock guard', () => {
  it('as an upgrade (the same release applied again): holds nothing a writer of any table waits for', async () => {
    const db = installed;
    // The code layer applied again, as any upgrade does (the digest differs).
    await db.query(`UPDATE public.subagent_context_installed SET code_digest = 'an earlier build'`);
    const { before, after } = await locksAroundTheGuard(db);
    expect(before).toEqual([]);
    // The guard then takes kandev's tables, and the trigger's re-creation holds the messages table.
    expect(after).toEqual(expect.arrayContaining(['task_session_messages ShareRowExclusiveLock', 'task_sessions ShareRowExclusiveLock']));
  });

  it('as a first install: holds nothing of kandev\'s tables (only the tables it is creating)', async () => {
    const db = host;
    const { before, after } = await locksAroundTheGuard(db);
    expect(before.filter((l) => /^task_session(s|_messages) /.test(l))).toEqual([]);
    expect(before.length).toBeGreaterThan(0);  // the new tables, which no other session sees yet
    expect(after).toEqual(expect.arrayContaining(['task_session_messages ShareRowExclusiveLock', 'task_sessions ShareRowExclusiveLock']));
    // The foreign key a first install adds once it holds task_sessions.
    const c = await db.connect();
    try {
      await c.query('BEGIN');
      for (const s of installStatements('public')) await c.query(s);
      const { rows } = await c.query(
        `SELECT pg_catalog.pg_get_constraintdef(oid) AS def FROM pg_catalog.pg_constraint
          WHERE conrelid = 'public.task_session_subagents'::regclass AND contype = 'f'`);
      expect(rows.map((r) => r.def)).toEqual(['FOREIGN KEY (task_session_id) REFERENCES public.task_sessions(id) ON DELETE CASCADE']);
    } finally {
      await c.query('ROLLBACK');
      await c.end();
    }
  });
});
