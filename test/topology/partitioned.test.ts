// docs/partitioning.md, docs/citus.md on a partitioned task_session_messages (PARTITION BY RANGE (created_at), primary key
// (id, created_at); kandev/schema/kandev-messages-partitioned.sql): `up` installs without blocking
// writers, capture and health cover every partition, including partitions created or attached later,
// retention (detach + drop) keeps the subagent rows, and a second `up` changes nothing.
//
// The fixture's partitions sit around the server's clock: history (before the previous month), then the
// previous, current and next month. Tests pin capture_since to the start of the current month, so the
// previous month and history are "before capture" and everything from the current month on is "since".
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freshDatabase } from '../helpers/database.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { HEALTH_INDEX } from '#sql';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { NODE_PG_MIGRATE } from '../helpers/migrations.js';

const db = await freshDatabase('partitioned');

const [{ month0 }] = (await db.query(
  `SELECT to_char(date_trunc('month', clock_timestamp() AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS month0`)).rows;

/** A timestamp on day 10 of the month `offset` months from the current one (UTC), as the host writes it. */
function at(offset: number, time = '09:00:00'): string {
  const d = new Date(`${month0}T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() + offset);
  return `${d.toISOString().slice(0, 8)}10 ${time}`;
}
const monthName = (offset: number) => `task_session_messages_p${at(offset).slice(0, 7).replace('-', '')}`;
const monthStart = (offset: number) => `${at(offset).slice(0, 8)}01 00:00:00`;
const CAPTURE_SINCE = `${month0}T00:00:00.000000000Z`;

const frame = (call: string, subagent: Record<string, unknown> = { subagent_type: 'explorer', status: 'async_launched' }) =>
  subagentMetadata({ tool_call_id: call, status: 'pending', subagent });

/** A message row written straight into `table` (a table that is not, or not yet, a partition). */
async function insertRaw(table: string, m: { id: string; session: string; task: string; turn: string; metadata: string; created_at: string }) {
  await db.query(
    `INSERT INTO ${table} (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'agent', '', 'tool_call', $5, $6, $6)`,
    [m.id, m.session, m.task, m.turn, m.metadata, m.created_at]);
}

async function health(schema: string) {
  return (await db.query(`SELECT * FROM "${schema}".subagent_context_health()`)).rows[0];
}

async function repair(schema: string): Promise<bigint> {
  return (await db.query(`SELECT repaired FROM "${schema}".subagent_context_repair()`)).rows[0].repaired;
}

async function rows(schema: string) {
  return (await db.query(
    `SELECT tool_call_id, source, subagent_type, agent_status, observed_at
       FROM "${schema}".task_session_subagents ORDER BY tool_call_id`)).rows;
}

/** Installed and activated on a partitioned host, capture_since pinned to the start of this month. */
async function activatedPartitioned(schema: string) {
  await db.createHost(schema, { partitioned: true });
  const result = await db.up(schema);
  expect(result.backfill.status).toBe('activated');
  await db.query(`UPDATE "${schema}".kandev_meta SET value = $1 WHERE key = 'subagent_context_capture_since'`, [CAPTURE_SINCE]);
  return createTurn(db.pool, schema, schema, at(-30));
}

/** Leaf partitions of the messages table, and health's index on each: its name, validity, parent index. */
async function partitionIndexes(schema: string) {
  return (await db.query(
    `SELECT c.relname AS partition, i.relname AS index, x.indisvalid AS valid,
            pi.relname AS attached_to, pg_get_expr(x.indpred, x.indrelid) AS predicate
       FROM pg_partition_tree(format('%I.task_session_messages', $1::text)::regclass) AS t
       JOIN pg_class AS c ON c.oid = t.relid
       LEFT JOIN pg_index AS x ON x.indrelid = c.oid AND x.indpred IS NOT NULL
            AND pg_get_expr(x.indpred, x.indrelid) LIKE '%subagent_task%'
       LEFT JOIN pg_class AS i ON i.oid = x.indexrelid
       LEFT JOIN pg_inherits AS h ON h.inhrelid = x.indexrelid
       LEFT JOIN pg_class AS pi ON pi.oid = h.inhparent
      WHERE t.isleaf
      ORDER BY c.relname, i.relname`, [schema])).rows;
}

async function parentIndex(schema: string) {
  return (await db.query(
    `SELECT c.relkind, x.indisvalid AS valid, pg_get_expr(x.indpred, x.indrelid) AS predicate, pg_get_indexdef(c.oid) AS def,
            obj_description(c.oid, 'pg_class') AS comment
       FROM pg_class AS c JOIN pg_index AS x ON x.indexrelid = c.oid
      WHERE c.oid = to_regclass(format('%I.subagent_context_recent_messages_idx', $1::text))`, [schema])).rows[0];
}

/** Everything `up` could change, for the "second up changes nothing" check. */
async function catalogSnapshot(schema: string) {
  return (await db.query(
    `SELECT 'index' AS what, c.oid::regclass::text AS name, x.indisvalid::text AS state, pg_get_indexdef(c.oid) AS def
       FROM pg_class AS c JOIN pg_index AS x ON x.indexrelid = c.oid
       JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = $1
     UNION ALL
     SELECT 'trigger', t.oid::text || ' ' || t.tgrelid::regclass::text, t.tgenabled::text, t.tgname
       FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
       JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal
     UNION ALL
     SELECT 'function', p.oid::text, p.proname, md5(p.prosrc)
       FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = $1
     UNION ALL
     SELECT 'key', k.key, k.value, '' FROM "${schema}".kandev_meta AS k
     ORDER BY 1, 2, 3, 4`, [schema])).rows;
}

describe('install on a partitioned task_session_messages', () => {
  it('up activates, with health index ON ONLY the parent, built on every partition and attached', async () => {
    await db.createHost('plain');
    await db.up('plain');
    const plain = await parentIndex('plain');

    await db.createHost('install', { partitioned: true });
    const result = await db.up('install');
    expect(result.backfill.status).toBe('activated');
    expect((await health('install')).activated).toBe(true);

    const parent = await parentIndex('install');
    expect(parent.relkind).toBe('I');  // a partitioned index: partitions created later get it too
    expect(parent.valid).toBe(true);   // valid only once every partition's index is attached
    expect(parent.predicate).toBe(plain.predicate);  // the same prefilter as on a plain table
    expect(parent.comment).toBe(plain.comment);

    const leaves = await partitionIndexes('install');
    expect(leaves.map((l) => l.partition)).toEqual(
      ['task_session_messages_history', monthName(-1), monthName(0), monthName(1)].sort());
    for (const leaf of leaves) {
      expect(leaf).toMatchObject({ valid: true, attached_to: 'subagent_context_recent_messages_idx', predicate: plain.predicate });
    }
  });

  it('derives history from every partition and captures writes into every partition', async () => {
    await db.createHost('every', { partitioned: true });
    const ids = await createTurn(db.pool, 'every', 'every', at(-30));
    const offsets = [-30, -1, 0, 1];  // history, previous, current and next month
    for (const [i, o] of offsets.entries()) {
      await insertMessage(db.pool, 'every', { id: `old-${i}`, session: ids.session, task: ids.task, turn: ids.turn,
        metadata: frame(`call-old-${i}`), created_at: at(o) });
    }
    await db.up('every');
    for (const [i, o] of offsets.entries()) {
      await insertMessage(db.pool, 'every', { id: `new-${i}`, session: ids.session, task: ids.task, turn: ids.turn,
        metadata: frame(`call-new-${i}`), created_at: at(o, '10:00:00') });
    }
    const placed = (await db.query(
      `SELECT tableoid::regclass::text AS partition, count(*)::int AS n FROM every.task_session_messages
        GROUP BY 1 ORDER BY 1`)).rows;
    expect(placed).toHaveLength(4);  // the messages really are spread over the four partitions
    expect(placed.every((p) => p.n === 2)).toBe(true);

    const stored = await rows('every');
    expect(stored.map((r) => [r.tool_call_id, r.source])).toEqual([
      ...offsets.map((_, i) => [`call-new-${i}`, 'live']),
      ...offsets.map((_, i) => [`call-old-${i}`, 'backfill']),
    ]);
    await db.query(`UPDATE every.kandev_meta SET value = $1 WHERE key = 'subagent_context_capture_since'`, [CAPTURE_SINCE]);
    expect(await health('every')).toMatchObject({ shortfall: 0n, excess: 0n, status: 'healthy' });
  });
});

describe('partitions created or attached after installation', () => {
  it('a partition created later (CREATE TABLE … PARTITION OF) gets the trigger and the index, and health reads it', async () => {
    const ids = await activatedPartitioned('later');
    await db.query(`CREATE TABLE later.${monthName(2)} PARTITION OF later.task_session_messages
                      FOR VALUES FROM ('${monthStart(2)}') TO ('${monthStart(3)}')`);
    const leaf = (await partitionIndexes('later')).find((l) => l.partition === monthName(2));
    expect(leaf).toMatchObject({ valid: true, attached_to: 'subagent_context_recent_messages_idx' });
    expect((await parentIndex('later')).valid).toBe(true);

    await insertMessage(db.pool, 'later', { id: 'm-later', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: frame('call-later', { status: 'async_launched' }), created_at: at(2) });
    await updateMessage(db.pool, 'later', 'm-later',
      frame('call-later', { status: 'completed', subagent_type: 'reviewer', total_tokens: 42 }), at(2, '09:05:00'));
    expect(await rows('later')).toMatchObject([{ tool_call_id: 'call-later', source: 'live', subagent_type: 'reviewer', agent_status: 'completed' }]);
    expect(await health('later')).toMatchObject({ shortfall: 0n, status: 'healthy' });

    // Health reads that partition: a row lost there is a shortfall.
    await db.query(`DELETE FROM later.task_session_subagents WHERE tool_call_id = 'call-later'`);
    expect(await health('later')).toMatchObject({ shortfall: 1n, status: 'shortfall' });
  });

  it('a table attached later with uncaptured rows since capture_since: health shows them as a shortfall, repair stores them, then capture goes on', async () => {
    const ids = await activatedPartitioned('attach');
    // A table loaded on its own (no partition yet, so no trigger fired), then attached.
    await db.query(`CREATE TABLE attach.loaded (LIKE attach.task_session_messages INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`);
    for (const i of [1, 2]) {
      await insertRaw('attach.loaded', { id: `loaded-${i}`, ...ids, metadata: frame(`call-loaded-${i}`), created_at: at(3) });
    }
    expect(await rows('attach')).toEqual([]);

    await db.query(`ALTER TABLE attach.task_session_messages ATTACH PARTITION attach.loaded
                      FOR VALUES FROM ('${monthStart(3)}') TO ('${monthStart(4)}')`);
    const leaf = (await partitionIndexes('attach')).find((l) => l.partition === 'loaded');
    expect(leaf).toMatchObject({ valid: true, attached_to: 'subagent_context_recent_messages_idx' });
    expect((await parentIndex('attach')).valid).toBe(true);

    // Messages created since capture_since with no row: exactly the shortfall, and repair stores them.
    expect(await health('attach')).toMatchObject({ shortfall: 2n, status: 'shortfall' });
    expect(await repair('attach')).toBe(2n);
    expect(await health('attach')).toMatchObject({ shortfall: 0n, status: 'healthy' });
    expect((await rows('attach')).map((r) => [r.tool_call_id, r.source]))
      .toEqual([['call-loaded-1', 'backfill'], ['call-loaded-2', 'backfill']]);

    // From the attach on, writes into it are captured and merge into the repaired row.
    await updateMessage(db.pool, 'attach', 'loaded-1',
      frame('call-loaded-1', { status: 'completed', subagent_type: 'tester' }), at(3, '09:10:00'));
    const merged = (await rows('attach')).find((r) => r.tool_call_id === 'call-loaded-1');
    expect(merged).toMatchObject({ source: 'backfill', subagent_type: 'tester', agent_status: 'completed' });
    expect((await db.query(`SELECT count(*)::int AS n FROM attach.task_session_subagents`)).rows[0].n).toBe(2);
  });
});

describe('retention: detaching and dropping old partitions', () => {
  it('keeps the subagent rows; health stays correct; an archive attached back is history, derived only by a new backfill', async () => {
    await db.createHost('keep', { partitioned: true });
    const ids = await createTurn(db.pool, 'keep', 'keep', at(-30));
    await insertMessage(db.pool, 'keep', { id: 'archived', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: frame('call-archived'), created_at: at(-30) });
    await db.up('keep');
    await db.query(`UPDATE keep.kandev_meta SET value = $1 WHERE key = 'subagent_context_capture_since'`, [CAPTURE_SINCE]);
    await insertMessage(db.pool, 'keep', { id: 'live', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: frame('call-live'), created_at: at(0) });
    expect(await health('keep')).toMatchObject({ shortfall: 0n, excess: 0n, status: 'healthy' });

    // Retention drops history (before capture_since): rows stay, health is unchanged.
    await db.query(`ALTER TABLE keep.task_session_messages DETACH PARTITION keep.task_session_messages_history`);
    await db.query(`ALTER TABLE keep.task_session_messages_history RENAME TO archive`);
    expect((await rows('keep')).map((r) => r.tool_call_id)).toEqual(['call-archived', 'call-live']);
    expect(await health('keep')).toMatchObject({ shortfall: 0n, excess: 0n, status: 'healthy' });

    // Dropping a partition with messages since capture_since: rows stay, they show as excess (never an alarm).
    await db.query(`ALTER TABLE keep.task_session_messages DETACH PARTITION keep.${monthName(0)}`);
    await db.query(`DROP TABLE keep.${monthName(0)}`);
    expect((await rows('keep')).map((r) => r.tool_call_id)).toEqual(['call-archived', 'call-live']);
    expect(await health('keep')).toMatchObject({ shortfall: 0n, excess: 1n, status: 'healthy' });
    await db.query(`DELETE FROM keep.task_session_subagents WHERE tool_call_id = 'call-live'`);

    // The archive attached back with a subagent the store has no row for (older than capture_since):
    // history, which health does not compare and repair does not touch; the bulk-load procedure
    // (delete both keys, backfill) derives it, and never duplicates what is stored.
    await db.query(`DELETE FROM keep.task_session_subagents WHERE tool_call_id = 'call-archived'`);
    await insertRaw('keep.archive', { id: 'archived-2', ...ids, metadata: frame('call-archived-2'), created_at: at(-31) });
    await db.query(`ALTER TABLE keep.task_session_messages ATTACH PARTITION keep.archive
                      FOR VALUES FROM (MINVALUE) TO ('${monthStart(-1)}')`);
    expect(await health('keep')).toMatchObject({ shortfall: 0n, excess: 0n, status: 'idle' });
    expect(await repair('keep')).toBe(0n);
    expect(await rows('keep')).toEqual([]);
    await db.query(`DELETE FROM keep.kandev_meta WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through')`);
    expect((await db.query(`SELECT status, inserted FROM keep.subagent_context_backfill()`)).rows[0])
      .toMatchObject({ status: 'activated', inserted: 2n });
    expect((await rows('keep')).map((r) => [r.tool_call_id, r.source]))
      .toEqual([['call-archived', 'backfill'], ['call-archived-2', 'backfill']]);
  });
});

describe('repeated and interrupted activation', () => {
  it('an interrupted index build (an invalid index on one partition, unattached) is repaired by the next up', async () => {
    await db.createHost('crash', { partitioned: true });
    await db.install('crash');
    // What an activation interrupted halfway leaves: the parent index (invalid), one partition's index
    // built and attached, another's build cancelled (INVALID, not attached).
    await db.createHost('crash_plain');
    await db.up('crash_plain');
    const plain = await parentIndex('crash_plain');  // the definition a plain table gets
    const definition = plain.def.replace(/^.* USING /, '');
    await db.query(`CREATE INDEX subagent_context_recent_messages_idx ON ONLY crash.task_session_messages USING ${definition}`);
    await db.query(`COMMENT ON INDEX crash.subagent_context_recent_messages_idx IS '${plain.comment}'`);
    await db.query(`CREATE INDEX crash_one ON crash.${monthName(0)} USING ${definition}`);
    await db.query(`ALTER INDEX crash.subagent_context_recent_messages_idx ATTACH PARTITION crash.crash_one`);
    await db.query(`CREATE INDEX crash_two ON crash.${monthName(1)} USING ${definition}`);
    await db.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'crash.crash_two'::regclass`);
    expect((await parentIndex('crash')).valid).toBe(false);

    await db.up('crash');
    const parent = await parentIndex('crash');
    expect(parent).toMatchObject({ relkind: 'I', valid: true, predicate: plain.predicate });
    const leaves = await partitionIndexes('crash');
    expect(leaves).toHaveLength(4);  // one index of ours per partition, no leftovers
    expect(leaves.find((l) => l.partition === monthName(0))?.index).toBe('crash_one');  // kept, not rebuilt
    for (const leaf of leaves) {
      expect(leaf).toMatchObject({ valid: true, attached_to: 'subagent_context_recent_messages_idx', predicate: plain.predicate });
    }
    expect((await db.query(`SELECT count(*)::int AS n FROM pg_index WHERE NOT indisvalid
                              AND indrelid IN (SELECT relid FROM pg_partition_tree('crash.task_session_messages'))`)).rows[0].n).toBe(0);
  });

  it("an earlier release's index (another definition) is replaced on every partition, and the old one dropped", async () => {
    await db.createHost('older', { partitioned: true });
    await db.install('older');
    // As a release with another prefilter would have left it: complete, valid, commented with its name.
    await db.query(`CREATE INDEX subagent_context_recent_messages_idx ON older.task_session_messages (created_at)
                      WHERE strpos(metadata, 'subagent') > 0`);
    await db.query(`COMMENT ON INDEX older.subagent_context_recent_messages_idx IS 'subagent-context: prefilter 0'`);
    expect((await parentIndex('older')).valid).toBe(true);

    await db.up('older');
    await db.createHost('older_plain');
    await db.up('older_plain');
    const plain = await parentIndex('older_plain');
    expect(await parentIndex('older')).toMatchObject({ relkind: 'I', valid: true, predicate: plain.predicate, comment: plain.comment });
    const leaves = await partitionIndexes('older');
    expect(leaves.map((l) => l.predicate)).toEqual(Array(4).fill(plain.predicate));  // the old ones are gone
    expect(leaves.every((l) => l.valid && l.attached_to === 'subagent_context_recent_messages_idx')).toBe(true);
    expect((await db.query(`SELECT to_regclass('older.subagent_context_recent_messages_idx_old') AS old`)).rows[0].old).toBeNull();
  });

  it('a second up changes nothing', async () => {
    await db.createHost('again', { partitioned: true });
    await db.up('again');
    const before = await catalogSnapshot('again');
    const second = await db.up('again');
    expect(second.applied).toEqual([]);
    expect(second.backfill.status).toBe('already activated');
    expect(await catalogSnapshot('again')).toEqual(before);
  });
});

describe('upgrades and plain node-pg-migrate on a partitioned host', () => {
  it.each(RELEASES)('from $version (0.1.0 could not activate there: backfill by hand), then up completes it, rebuilds the index and keeps everything', async (release) => {
    const schema = `up_${release.version.replaceAll('.', '_')}`;
    await db.createHost(schema, { partitioned: true });
    const ids = await createTurn(db.pool, schema, schema, at(-30));
    await insertMessage(db.pool, schema, { id: 'hist', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: frame('call-hist'), created_at: at(-30) });
    const failed = await installRelease(release, db.url, schema).then(() => null, (e: Error) => e.message);
    if (release.version === '0.1.0') {
      // What the field saw: the install committed, the activation's CREATE INDEX CONCURRENTLY failed.
      expect(failed).toMatch(/cannot create index on partitioned table "task_session_messages" concurrently/);
      expect((await db.query(`SELECT count(*)::int AS n FROM "${schema}".subagent_context_migrations`)).rows[0].n).toBe(1);
      const backfilled = (await db.query(`SELECT status FROM "${schema}".subagent_context_backfill()`)).rows[0];
      expect(backfilled.status).toBe('activated');
    } else {
      expect(failed).toBeNull();
    }
    await insertMessage(db.pool, schema, { id: 'live', session: ids.session, task: ids.task, turn: ids.turn,
      metadata: frame('call-live'), created_at: at(0, '12:00:00') });
    const keep = async () => ({
      keys: (await db.query(`SELECT key, value FROM "${schema}".kandev_meta ORDER BY key`)).rows,
      rows: (await db.query(`SELECT id, tool_call_id, source FROM "${schema}".task_session_subagents ORDER BY tool_call_id`)).rows,
    });
    const before = await keep();
    expect(before.rows.map((r) => [r.tool_call_id, r.source])).toEqual([['call-hist', 'backfill'], ['call-live', 'live']]);

    const result = await db.up(schema);
    expect(result.backfill.status).toBe('already activated');
    expect(await keep()).toEqual(before);
    expect((await parentIndex(schema))).toMatchObject({ relkind: 'I', valid: true });
    expect((await partitionIndexes(schema)).every((l) => l.valid && l.attached_to === 'subagent_context_recent_messages_idx')).toBe(true);
    // Built for this release's prefilter, the earlier release's index gone.
    const { rows: [idx] } = await db.query(`SELECT obj_description(to_regclass('"${schema}".subagent_context_recent_messages_idx'), 'pg_class') AS comment,
      to_regclass('"${schema}".subagent_context_recent_messages_idx_old') AS old`);
    expect(idx).toEqual({ comment: HEALTH_INDEX.comment, old: null });
    const snapshot = await catalogSnapshot(schema);
    expect((await db.up(schema)).applied).toEqual([]);
    expect(await catalogSnapshot(schema)).toEqual(snapshot);
  });

  it('plain node-pg-migrate up (one transaction by default) installs and activates a partitioned host', async () => {
    await db.createHost('npm_parts', { partitioned: true });
    const out = await promisify(execFile)(process.execPath, [NODE_PG_MIGRATE, 'up', '-m', 'migrations',
      '--migrations-table', 'subagent_context_migrations', '--schema', 'npm_parts'], {
      cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: db.url }, timeout: 120_000,
    });
    expect(out.stdout).toContain('1764680000001_activate');
    expect((await health('npm_parts')).activated).toBe(true);
    expect(await parentIndex('npm_parts')).toMatchObject({ relkind: 'I', valid: true });
    expect((await partitionIndexes('npm_parts')).every((l) => l.valid && l.attached_to === 'subagent_context_recent_messages_idx')).toBe(true);
  });
});
