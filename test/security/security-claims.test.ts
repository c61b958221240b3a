// Claims of docs/security.md that the other test files do not already pin: what a hostile message row
// cannot do. Each test writes messages as a writer of kandev's tables could and checks exact outcomes.
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { utcTimestamp } from '../../src/timestamp.js';

const db = await freshDatabase('security_claims', { from: 'host' });
const pool = db.pool;

const utcNow = (offsetMs = 0) => utcTimestamp(Date.now() + offsetMs);

/** JSON nested `depth` levels deep around the word subagent_task: passes the prefilter, overflows a parser. */
const deep = (depth: number) => '['.repeat(depth) + '"subagent_task"' + ']'.repeat(depth);

describe('a hostile message cannot break the history paths', () => {
  it('metadata nested 100,000 levels deep: the write commits, and backfill, health and repair all still run', async () => {
    const t = await createTurn(pool, 'public', 'deep');
    // Before activation: the backfill must scan it.
    await insertMessage(pool, 'public', { id: 'deep-before', session: t.session, task: t.task, turn: t.turn, metadata: deep(100_000) });
    await insertMessage(pool, 'public', { id: 'ok-before', session: t.session, task: t.task, turn: t.turn,
      metadata: subagentMetadata({ tool_call_id: 'toolu_ok_before', status: 'completed', subagent: { total_tokens: 5 } }) });
    const result = await db.up();
    expect(result.backfill).toMatchObject({ status: 'activated', inserted: 1 });

    // After activation, through the trigger, and then scanned by health and repair.
    await insertMessage(pool, 'public', { id: 'deep-after', session: t.session, task: t.task, turn: t.turn,
      created_at: utcNow(1000), metadata: deep(100_000) });
    // A qualifying document whose description holds a deep array: it must still be derived.
    const nestedButValid = JSON.stringify({ tool_call_id: 'toolu_nested', status: 'completed',
      normalized: { kind: 'subagent_task', subagent_task: { description: 'nested', total_tokens: 9, extra: JSON.parse(deep(300)) } } });
    await insertMessage(pool, 'public', { id: 'nested-after', session: t.session, task: t.task, turn: t.turn,
      created_at: utcNow(1000), metadata: nestedButValid });
    const { rows: stored } = await db.query(`SELECT tool_call_id, description, total_tokens FROM task_session_subagents ORDER BY tool_call_id`);
    expect(stored).toEqual([
      { tool_call_id: 'toolu_nested', description: 'nested', total_tokens: 9n },
      { tool_call_id: 'toolu_ok_before', description: null, total_tokens: 5n }]);
    expect((await db.query(`SELECT shortfall, excess, failures FROM subagent_context_health()`)).rows[0])
      .toEqual({ shortfall: 0n, excess: 0n, failures: 0n });
    // Repair re-derives from history: the deep document is parsed through the guarded path and skipped.
    await db.query(`DELETE FROM task_session_subagents WHERE tool_call_id = 'toolu_nested'`);
    expect((await db.query(`SELECT shortfall FROM subagent_context_health()`)).rows[0].shortfall).toBe(1n);
    expect((await db.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(1n);
    expect((await db.query(`SELECT total_tokens FROM task_session_subagents WHERE tool_call_id = 'toolu_nested'`)).rows)
      .toEqual([{ total_tokens: 9n }]);
  });
});

// Its own database, created at file level so that freshDatabase can register the drop (a hook
// registered inside a running test is not run, and the database would be left behind).
const db2 = await freshDatabase('security_huge_key', { from: 'host' });

describe('a tool_call_id too long for an index entry', () => {
  // 60 kB of random hex: incompressible, so no btree entry can hold it.
  const huge = 'toolu_' + randomBytes(30_000).toString('hex');

  it('blocks neither backfill nor repair: it stays in the shortfall, logged as a failure, and the rest is stored', async () => {
    const p2 = db2.pool;
    const t = await createTurn(p2, 'public', 'huge');
    const write = (id: string, call: string, created_at?: string) => insertMessage(p2, 'public', {
      id, session: t.session, task: t.task, turn: t.turn, created_at,
      metadata: subagentMetadata({ tool_call_id: call, status: 'completed', subagent: { total_tokens: 3 } }) });
    await write('huge-before', huge);
    await write('ok-before', 'toolu_ok_before');
    expect((await db2.up()).backfill).toMatchObject({ status: 'activated', inserted: 1 });

    await write('huge-after', huge + 'x', utcNow(1000));          // live: caught, logged, write commits
    await db2.query(`ALTER TABLE task_session_messages DISABLE TRIGGER subagent_context_capture`);
    await write('missed-after', 'toolu_missed_after', utcNow(1000));
    await db2.query(`ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture`);
    expect((await db2.query(`SELECT sqlstate, message_id FROM subagent_context_failures`)).rows)
      .toEqual([{ sqlstate: '54000', message_id: 'huge-after' }]);
    expect((await db2.query(`SELECT shortfall, failures FROM subagent_context_health()`)).rows[0]).toEqual({ shortfall: 2n, failures: 1n });
    expect((await db2.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(1n);
    expect((await db2.query(`SELECT tool_call_id FROM task_session_subagents ORDER BY 1`)).rows.map((r) => r.tool_call_id))
      .toEqual(['toolu_missed_after', 'toolu_ok_before']);
    // Truthful: the one call that cannot be stored is still reported missing.
    expect((await db2.query(`SELECT shortfall FROM subagent_context_health()`)).rows[0].shortfall).toBe(1n);
  });
});

describe('a role with no table privileges (a dashboard)', () => {
  it('reads health and stats (counts only), and is refused repair, backfill, the failure log and the rows', async () => {
    const role = `sc_dash_${randomBytes(4).toString('hex')}`;
    await db.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER`);
    await db.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
    const u = new URL(db.url);
    u.username = role;
    u.password = '';
    const c = new pg.Client(u.toString());
    c.on('error', () => {});
    await c.connect();
    try {
      const { rows: [h] } = await c.query(`SELECT activated, shortfall FROM public.subagent_context_health()`);
      expect(h).toEqual({ activated: true, shortfall: 0n });
      const { rows: [s] } = await c.query(`SELECT failed FROM public.subagent_context_stats()`);
      expect(s.failed).toBe(0n);
      const refused = async (sql: string) => c.query(sql).then(() => 'ran', (e) => e.code);
      expect(await refused(`SELECT * FROM public.subagent_context_repair()`)).toBe('42501');
      expect(await refused(`SELECT * FROM public.subagent_context_backfill()`)).toBe('42501');
      expect(await refused(`SELECT * FROM public.subagent_context_failures`)).toBe('42501');
      expect(await refused(`SELECT * FROM public.task_session_subagents`)).toBe('42501');
      expect(await refused(`SELECT public.subagent_context_capture_message()`)).toBe('42501');
    } finally {
      await c.end();
      await db.query(`DROP OWNED BY ${role}`);
      await db.query(`DROP ROLE ${role}`);
    }
  });
});

describe('health trusts kandev_meta (a documented limit)', () => {
  it('a role that can write kandev_meta can move capture_since and hide a miss; putting the key back shows it again', async () => {
    const t = await createTurn(pool, 'public', 'meta');
    await db.query(`ALTER TABLE task_session_messages DISABLE TRIGGER subagent_context_capture`);
    await insertMessage(pool, 'public', { id: 'missed', session: t.session, task: t.task, turn: t.turn,
      created_at: utcNow(1000), metadata: subagentMetadata({ tool_call_id: 'toolu_missed', status: 'pending' }) });
    await db.query(`ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture`);
    expect((await db.query(`SELECT shortfall FROM subagent_context_health()`)).rows[0].shortfall).toBe(1n);
    const { rows: [key] } = await db.query(`SELECT value FROM kandev_meta WHERE key = 'subagent_context_capture_since'`);
    await db.query(`UPDATE kandev_meta SET value = '2999-01-01T00:00:00.000000000Z' WHERE key = 'subagent_context_capture_since'`);
    expect((await db.query(`SELECT activated, shortfall FROM subagent_context_health()`)).rows[0]).toEqual({ activated: true, shortfall: 0n });
    // The installer never rewrites a present key, so it does not undo the move either.
    expect((await db.up()).backfill.status).toBe('already activated');
    await db.query(`UPDATE kandev_meta SET value = $1 WHERE key = 'subagent_context_capture_since'`, [key.value]);
    expect((await db.query(`SELECT shortfall FROM subagent_context_health()`)).rows[0].shortfall).toBe(1n);
    expect((await db.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(1n);
  });
});

describe('a hostile message cannot choose what it does not own', () => {
  it('identity, source, id and times come from the message columns and the clock, never from metadata', async () => {
    const mine = await createTurn(pool, 'public', 'mine');
    const other = await createTurn(pool, 'public', 'other');
    await insertMessage(pool, 'public', {
      id: 'forger', session: mine.session, task: mine.task, turn: mine.turn,
      created_at: '2026-09-01 10:00:00', updated_at: '2026-09-01 10:00:01',
      metadata: JSON.stringify({
        tool_call_id: 'toolu_forged', status: 'pending',
        task_session_id: other.session, task_id: other.task, turn_id: other.turn, id: 'chosen-id',
        source: 'backfill', observed_at: '1999-01-01 00:00:00', settled_at: '1999-01-01 00:00:00',
        updated_at: '2999-01-01 00:00:00',
        normalized: { kind: 'subagent_task', subagent_task: {
          task_session_id: other.session, source: 'backfill', description: `'); DROP TABLE task_session_subagents; --` } },
      }),
    });
    const { rows } = await db.query(`SELECT * FROM task_session_subagents WHERE tool_call_id = 'toolu_forged'`);
    expect(rows).toHaveLength(1);
    const { id, ...row } = rows[0];
    expect(id).not.toBe('chosen-id');
    expect(row).toMatchObject({
      task_session_id: mine.session, task_id: mine.task, turn_id: mine.turn, source: 'live',
      observed_at: '2026-09-01 10:00:00', settled_at: null, updated_at: '2026-09-01 10:00:01',
      description: `'); DROP TABLE task_session_subagents; --`,
    });
    expect((await db.query(`SELECT count(*) AS n FROM task_session_subagents WHERE task_session_id = $1`, [other.session])).rows[0].n).toBe(0n);
  });
});
