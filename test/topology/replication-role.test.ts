// session_replication_role = replica is how logical-replication apply workers and pg_restore (data-only,
// --disable-triggers as superuser) write: ordinary (ENABLE ORIGIN) triggers do not fire. Capture misses
// those writes, health says so, repair fixes it; a trigger set ENABLE ALWAYS captures them.
// The procedure is in docs/reliability.md.
import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { captureTrigger } from '../helpers/catalog.js';
import { installStatements } from '#sql';
import { createTurn, insertMessage, subagentMetadata, updateMessage, type Queryable } from '../../kandev/host.js';
import { utcTimestamp } from '../../src/timestamp.js';

const db = await freshDatabase('replication_role', { from: 'installed' });
const pool = db.pool;

/** A UTC wall-clock time after activation (health only compares messages created since capture_since). */
function utcNow(offsetMs = 0) {
  return utcTimestamp(Date.now() + offsetMs);
}

let replica: pg.Client;
beforeAll(async () => {
  replica = await db.connect();
  await replica.query(`SET session_replication_role = replica`);
});

async function write(client: Queryable, key: string, tokens: number) {
  const t = await createTurn(client, 'public', key);
  const at = utcNow(1000);
  await insertMessage(client, 'public', {
    id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn, created_at: at, updated_at: at,
    metadata: subagentMetadata({ tool_call_id: `toolu_${key}`, status: 'pending', subagent: { subagent_type: 'explorer' } }),
  });
  await updateMessage(client, 'public', `msg-${key}`, subagentMetadata({
    tool_call_id: `toolu_${key}`, status: 'completed', subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: tokens },
  }), utcNow(2000));
  return t;
}

async function row(key: string) {
  const { rows } = await db.query(
    `SELECT tool_call_id, source, total_tokens, tool_status FROM task_session_subagents WHERE tool_call_id = $1`, [`toolu_${key}`]);
  return rows;
}

const health = async () => (await db.query(`SELECT shortfall, excess, trigger_enabled, failures FROM subagent_context_health()`)).rows[0];
const tgenabled = () => captureTrigger(db.pool);

describe('session_replication_role = replica', () => {
  it('writes in replica role are not captured, and the message writes succeed', async () => {
    await write(replica, 'rep1', 100);
    await write(replica, 'rep2', 200);
    expect((await db.query(`SELECT count(*) AS n FROM task_session_messages WHERE id IN ('msg-rep1', 'msg-rep2')`)).rows[0].n).toBe(2n);
    expect(await row('rep1')).toEqual([]);
    expect(await row('rep2')).toEqual([]);
  });

  it('health shows exactly those misses as shortfall while the trigger itself reads as enabled', async () => {
    expect(await health()).toEqual({ shortfall: 2n, excess: 0n, trigger_enabled: true, failures: 0n });
  });

  it('repair stores them from message history, and the shortfall goes to 0', async () => {
    const { rows } = await db.query(`SELECT repaired FROM subagent_context_repair()`);
    expect(rows[0].repaired).toBe(2n);
    expect(await row('rep1')).toEqual([{ tool_call_id: 'toolu_rep1', source: 'backfill', total_tokens: 100n, tool_status: 'completed' }]);
    expect(await row('rep2')).toEqual([{ tool_call_id: 'toolu_rep2', source: 'backfill', total_tokens: 200n, tool_status: 'completed' }]);
    expect(await health()).toEqual({ shortfall: 0n, excess: 0n, trigger_enabled: true, failures: 0n });
    // A second repair has nothing to do.
    expect((await db.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(0n);
  });

  it('a normal session keeps capturing meanwhile', async () => {
    await write(pool, 'origin1', 300);
    expect(await row('origin1')).toEqual([{ tool_call_id: 'toolu_origin1', source: 'live', total_tokens: 300n, tool_status: 'completed' }]);
  });

  it('ENABLE ALWAYS TRIGGER captures replica-role writes live; health reads it as enabled', async () => {
    await db.query(`ALTER TABLE task_session_messages ENABLE ALWAYS TRIGGER subagent_context_capture`);
    expect(await tgenabled()).toBe('A');
    await write(replica, 'always1', 400);
    expect(await row('always1')).toEqual([{ tool_call_id: 'toolu_always1', source: 'live', total_tokens: 400n, tool_status: 'completed' }]);
    expect(await health()).toEqual({ shortfall: 0n, excess: 0n, trigger_enabled: true, failures: 0n });
  });

  it('ENABLE REPLICA (fires only in replica role) counts as disabled: normal writes would be missed', async () => {
    await db.query(`ALTER TABLE task_session_messages ENABLE REPLICA TRIGGER subagent_context_capture`);
    expect((await health()).trigger_enabled).toBe(false);
    await write(pool, 'origin2', 500);
    expect(await row('origin2')).toEqual([]);
    expect((await health()).shortfall).toBe(1n);
    await db.query(`ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture`);
    expect((await db.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(1n);
    expect(await health()).toEqual({ shortfall: 0n, excess: 0n, trigger_enabled: true, failures: 0n });
  });

  it.each([['ALWAYS', 'A'], ['REPLICA', 'R'], ['', 'O']])(
    're-applying the code layer (what an upgrade does) keeps ENABLE %s', async (mode, state) => {
      await db.query(`ALTER TABLE task_session_messages ENABLE ${mode} TRIGGER subagent_context_capture`);
      await db.query(['BEGIN', ...installStatements('public'), 'COMMIT'].join(';\n'));
      expect(await tgenabled()).toBe(state);
    });

  it('history older than capture_since loaded in replica role is invisible to health; deleting both keys and re-running backfill derives it', async () => {
    await db.query(`ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture`);
    const t = await createTurn(replica, 'public', 'old');
    await insertMessage(replica, 'public', { id: 'msg-old', session: t.session, task: t.task, turn: t.turn,
      created_at: '2026-01-05 08:00:00', updated_at: '2026-01-05 08:00:09',
      metadata: subagentMetadata({ tool_call_id: 'toolu_old', status: 'completed', subagent: { total_tokens: 700 } }) });
    expect(await row('old')).toEqual([]);
    expect((await health()).shortfall).toBe(0n);  // health compares only what was written since activation
    expect((await db.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(0n);
    const before = (await db.query(`SELECT count(*) AS n FROM task_session_subagents`)).rows[0].n;
    await db.query(`DELETE FROM kandev_meta WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through')`);
    const result = await db.up();
    expect(result.backfill).toMatchObject({ status: 'activated', inserted: 1 });
    expect(await row('old')).toEqual([{ tool_call_id: 'toolu_old', source: 'backfill', total_tokens: 700n, tool_status: 'completed' }]);
    expect((await db.query(`SELECT count(*) AS n FROM task_session_subagents`)).rows[0].n).toBe(before + 1n);
  });

  it('pg_restore --disable-triggers style (DISABLE TRIGGER ALL … ENABLE TRIGGER ALL) misses the loaded rows; repair fixes it', async () => {
    await db.query(`ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture`);
    await db.query(`ALTER TABLE task_session_messages DISABLE TRIGGER ALL`);
    expect((await health()).trigger_enabled).toBe(false);
    await write(pool, 'restored1', 600);
    await db.query(`ALTER TABLE task_session_messages ENABLE TRIGGER ALL`);
    expect(await health()).toEqual({ shortfall: 1n, excess: 0n, trigger_enabled: true, failures: 0n });
    expect((await db.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(1n);
    expect(await row('restored1')).toEqual([{ tool_call_id: 'toolu_restored1', source: 'backfill', total_tokens: 600n, tool_status: 'completed' }]);
    expect((await health()).shortfall).toBe(0n);
  });
});
