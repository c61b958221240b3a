// Capture on a task_session_messages managed by pg_partman (docs/integration.md, docs/partitioning.md, docs/citus.md): create_parent makes the
// partitions (and a default one), `up` installs on them, run_maintenance adds partitions ahead of time
// (they get capture's trigger and health's index) and drops old ones for retention (the subagent rows
// stay). pg_partman is a server extension: CI installs Debian's postgresql-15-partman for the system
// PostgreSQL 15 (.ci/run, which also sets SUBAGENT_CONTEXT_REQUIRE_PARTMAN=1 so that run cannot skip it);
// where the server has none (the embedded servers) this file skips, saying so.
import { describe, expect, it, inject } from 'vitest';
import pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';

// Asked of the server before any database is made: when every test of a file is skipped its hooks
// never run, so a database made for nothing would never be dropped.
async function availablePartman(): Promise<string | null> {
  const c = new pg.Client(inject('adminUrl'));
  await c.connect();
  try {
    return (await c.query(`SELECT default_version AS v FROM pg_available_extensions WHERE name = 'pg_partman'`)).rows[0]?.v ?? null;
  } finally {
    await c.end();
  }
}
const version = await availablePartman();
if (!version && process.env.SUBAGENT_CONTEXT_REQUIRE_PARTMAN === '1') {
  // CI's system-15 run installs the package; a skip there would hide that this test never ran.
  throw new Error('SUBAGENT_CONTEXT_REQUIRE_PARTMAN=1 but this server has no pg_partman: apt-get install postgresql-15-partman');
}
if (!version) {
  console.warn('partman.test.ts skipped: this PostgreSQL server has no pg_partman extension available ' +
    '(CI installs postgresql-15-partman for the system PostgreSQL 15; the embedded servers have none)');
}

const db = version ? await freshDatabase('partman') : null!;
const S = 'pm';
const month = async (offset: number) => (await db.query(
  `SELECT to_char(date_trunc('month', clock_timestamp() AT TIME ZONE 'UTC') + make_interval(months => $1), 'YYYY-MM-DD') AS d`,
  [offset])).rows[0].d as string;

const leaves = async () => (await db.query(
  `SELECT c.relname AS partition,
          EXISTS (SELECT 1 FROM pg_trigger AS t WHERE t.tgrelid = c.oid AND t.tgname = 'subagent_context_capture'
                     AND t.tgenabled IN ('O', 'A')) AS captured,
          EXISTS (SELECT 1 FROM pg_index AS x JOIN pg_inherits AS h ON h.inhrelid = x.indexrelid
                   WHERE x.indrelid = c.oid AND x.indisvalid
                     AND h.inhparent = to_regclass('${S}.subagent_context_recent_messages_idx')) AS indexed
     FROM pg_partition_tree('${S}.task_session_messages') AS t JOIN pg_class AS c ON c.oid = t.relid
    WHERE t.isleaf ORDER BY 1`)).rows;

const health = async () => (await db.query(`SELECT * FROM ${S}.subagent_context_health()`)).rows[0];

describe.skipIf(!version)(`pg_partman ${version ?? '(not available)'} manages task_session_messages`, () => {
  it('create_parent, up, capture, run_maintenance ahead and for retention', async () => {
    await db.query(`CREATE SCHEMA partman`);
    await db.query(`CREATE EXTENSION pg_partman SCHEMA partman`);
    await db.createHost(S, { partitioned: 'parent only' });
    const start = await month(-3);
    if (version!.startsWith('4.')) {
      await db.query(`SELECT partman.create_parent('${S}.task_session_messages', 'created_at', 'native', '1 month',
                        p_premake := 1, p_start_partition := $1)`, [start]);
    } else {
      await db.query(`SELECT partman.create_parent('${S}.task_session_messages', 'created_at', '1 month',
                        p_premake := 1, p_start_partition := $1)`, [start]);
    }
    const made = await leaves();
    expect(made.length).toBeGreaterThanOrEqual(5);  // 3 months back, this one, 1 ahead, and the default
    expect(made.some((l) => l.partition.endsWith('_default'))).toBe(true);

    const ids = await createTurn(db.pool, S, S, `${start} 00:00:00`);
    await insertMessage(db.pool, S, { id: 'm-old', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: subagentMetadata({ tool_call_id: 'call-old', subagent: { status: 'completed' } }), created_at: `${start} 09:00:00` });

    const result = await db.up(S);
    expect(result.backfill.status).toBe('activated');
    expect(await leaves()).toEqual(made.map((l) => ({ ...l, captured: true, indexed: true })));

    // Live writes into this month's partition and into the default (before every range) are captured.
    const now = await month(0);
    await insertMessage(db.pool, S, { id: 'm-now', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: subagentMetadata({ tool_call_id: 'call-now', subagent: { status: 'async_launched' } }),
      created_at: `${now} 12:00:00`, updated_at: `${now} 12:00:00` });
    await insertMessage(db.pool, S, { id: 'm-far', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: subagentMetadata({ tool_call_id: 'call-far', subagent: { status: 'async_launched' } }), created_at: '2000-01-01 00:00:00' });
    expect((await db.query(`SELECT tableoid::regclass::text AS p FROM ${S}.task_session_messages WHERE id = 'm-far'`)).rows[0].p)
      .toMatch(/_default$/);
    const stored = async () => (await db.query(
      `SELECT tool_call_id, source FROM ${S}.task_session_subagents ORDER BY tool_call_id`)).rows;
    expect(await stored()).toEqual([
      { tool_call_id: 'call-far', source: 'live' }, { tool_call_id: 'call-now', source: 'live' },
      { tool_call_id: 'call-old', source: 'backfill' }]);

    // Maintenance ahead of time: more premade partitions, each with the trigger and the index.
    await db.query(`UPDATE partman.part_config SET premake = 4 WHERE parent_table = '${S}.task_session_messages'`);
    await db.query(`SELECT partman.run_maintenance('${S}.task_session_messages')`);
    const ahead = await leaves();
    expect(ahead.length).toBeGreaterThan(made.length);
    expect(ahead.every((l) => l.captured && l.indexed)).toBe(true);
    const later = await month(3);
    await insertMessage(db.pool, S, { id: 'm-later', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: subagentMetadata({ tool_call_id: 'call-later', subagent: { status: 'async_launched' } }), created_at: `${later} 08:00:00` });
    const placed = (await db.query(`SELECT tableoid::regclass::text AS p FROM ${S}.task_session_messages WHERE id = 'm-later'`)).rows[0].p;
    expect(made.map((l) => `${S}.${l.partition}`)).not.toContain(placed);  // a partition run_maintenance made
    expect((await stored()).map((r) => r.tool_call_id)).toContain('call-later');
    expect(await health()).toMatchObject({ shortfall: 0n, status: 'healthy' });

    // Retention: run_maintenance detaches and drops partitions older than a month; the rows stay.
    const oldest = (await db.query(`SELECT tableoid::regclass::text AS p FROM ${S}.task_session_messages WHERE id = 'm-old'`)).rows[0].p;
    await db.query(`UPDATE partman.part_config SET retention = '1 month', retention_keep_table = false
                     WHERE parent_table = '${S}.task_session_messages'`);
    await db.query(`SELECT partman.run_maintenance('${S}.task_session_messages')`);
    expect((await db.query(`SELECT count(*)::int AS n FROM ${S}.task_session_messages WHERE id = 'm-old'`)).rows[0].n).toBe(0);
    expect((await db.query(`SELECT to_regclass($1) AS p`, [oldest])).rows[0].p).toBeNull();  // dropped
    expect((await leaves()).every((l) => l.captured && l.indexed)).toBe(true);
    expect((await stored()).map((r) => r.tool_call_id)).toEqual(['call-far', 'call-later', 'call-now', 'call-old']);
    expect(await health()).toMatchObject({ shortfall: 0n, excess: 0n, status: 'healthy' });
  });
});
