// The activation keys (docs/health.md): written once by the guarded backfill, in the exact format, never
// rewritten; a missing one is recomputed; a failed backfill writes neither and a rerun retries.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { captureTrigger } from '../helpers/catalog.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { backfill } from '../../src/install.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MIGRATIONS } from '../helpers/migrations.js';

const db = await freshDatabase('activation_keys');

const KEY_FORMAT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/;

async function keys(schema: string): Promise<Record<string, string>> {
  const { rows } = await db.query(`SELECT key, value FROM "${schema}".kandev_meta ORDER BY key`);
  return Object.fromEntries(rows.map((r) => [r.key, r.value]));
}

/** The database clock, UTC, as a timestamp (what the keys are compared with). */
async function clockSample(): Promise<string> {
  const { rows } = await db.query(`SELECT clock_timestamp() AT TIME ZONE 'UTC' AS now`);
  return rows[0].now;
}

/** Is key value `key` (RFC 3339, Z) at or after the UTC timestamp `sample`, at microsecond resolution? */
async function atOrAfter(key: string, sample: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT ($1::timestamptz AT TIME ZONE 'UTC') >= $2::timestamp AS ok`, [key, sample]);
  return rows[0].ok;
}

async function history(schema: string, key: string, created: string[]) {
  const t = await createTurn(db.pool, schema, key);
  for (const [i, at] of created.entries()) {
    await insertMessage(db.pool, schema, { id: `${key}-${i}`, session: t.session, task: t.task, turn: t.turn,
      created_at: at, metadata: subagentMetadata({ tool_call_id: `toolu_${key}_${i}`, status: 'pending' }) });
  }
  return t;
}

async function rowCount(schema: string): Promise<bigint> {
  const { rows } = await db.query(`SELECT count(*) AS n FROM "${schema}".task_session_subagents`);
  return rows[0].n;
}

describe('activation on a store with history', async () => {
  await db.createHost('k1');
  const t = await history('k1', 'a', ['2026-08-12 09:00:00', '2026-08-12 09:00:02.123456', '2026-08-12 08:59:59']);
  // A newer message that does not qualify for lack of identity does not move backfill_through.
  await insertMessage(db.pool, 'k1', { id: 'a-anon', session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-08-12 10:00:00', metadata: subagentMetadata({ status: 'pending' }) });
  const before = await clockSample();
  const first = await db.up('k1');
  const after = await clockSample();
  const written = await keys('k1');

  it('writes both keys in the exact format: UTC, T, nine fraction digits ending 000, Z', () => {
    expect(Object.keys(written)).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    for (const value of Object.values(written)) {
      expect(value).toMatch(KEY_FORMAT);
      expect(value.slice(-4)).toBe('000Z');
    }
    expect(first.backfill).toEqual({ status: 'activated', inserted: 3, failure: null,
      capture_since: written.subagent_context_capture_since,
      backfill_through: written.subagent_context_backfill_through });
  });

  it('sets backfill_through to the newest qualifying created_at, microseconds kept', () => {
    expect(written.subagent_context_backfill_through).toBe('2026-08-12T09:00:02.123456000Z');
  });

  it('samples capture_since from the clock after the insert, inside the command', async () => {
    expect(await atOrAfter(written.subagent_context_capture_since, before)).toBe(true);
    expect(await atOrAfter(written.subagent_context_capture_since, after)).toBe(false);
  });

  it('never rewrites the keys and never rescans history once activated', async () => {
    await db.query(`DELETE FROM k1.task_session_subagents WHERE tool_call_id = 'toolu_a_1'`);
    const again = await db.up('k1');
    const { reconciliation, ...rest } = again;
    expect(rest).toEqual({ applied: [], upgraded: null, backfill: { status: 'already activated', inserted: 0, failure: null,
      capture_since: written.subagent_context_capture_since,
      backfill_through: written.subagent_context_backfill_through } });
    // Its reconciliation is recent: nothing of history is compared again either.
    expect(reconciliation?.status).toBe('current');
    const client = await db.connect();
    expect((await backfill(client, 'k1')).status).toBe('already activated');
    expect(await keys('k1')).toEqual(written);
    const { rows } = await db.query(`SELECT tool_call_id FROM k1.task_session_subagents ORDER BY tool_call_id`);
    expect(rows.map((r) => r.tool_call_id)).toEqual(['toolu_a_0', 'toolu_a_2']);
  });
});

describe('activation on a store without qualifying history', async () => {
  await db.createHost('k2');
  const t = await createTurn(db.pool, 'k2', 'e');
  await insertMessage(db.pool, 'k2', { id: 'e-plain', session: t.session, task: t.task, turn: t.turn,
    metadata: '{}', type: 'message' });
  await insertMessage(db.pool, 'k2', { id: 'e-broken', session: t.session, task: t.task, turn: t.turn,
    metadata: '{"normalized":{"kind":"subagent_task"' });
  const result = await db.up('k2');

  it("writes backfill_through as '' (present, nothing qualified) and capture_since in the format", async () => {
    const written = await keys('k2');
    expect(written.subagent_context_backfill_through).toBe('');
    expect(written.subagent_context_capture_since).toMatch(KEY_FORMAT);
    expect(result.backfill.status).toBe('activated');
    expect(result.backfill.inserted).toBe(0);
    expect(await rowCount('k2')).toBe(0n);
  });

  it("counts '' as present: a rerun finds the store activated", async () => {
    const client = await db.connect();
    expect((await backfill(client, 'k2')).status).toBe('already activated');
  });
});

describe('a partial pair of keys', async () => {
  await db.createHost('k3');
  await history('k3', 'p', ['2026-08-12 07:00:00.5']);
  await db.up('k3');
  const original = await keys('k3');
  const client = await db.connect();

  it('recomputes a missing capture_since and leaves backfill_through byte-identical', async () => {
    await db.query(`DELETE FROM k3.kandev_meta WHERE key = 'subagent_context_capture_since'`);
    const before = await clockSample();
    const result = await backfill(client, 'k3');
    expect(result.status).toBe('activated');
    const now = await keys('k3');
    expect(now.subagent_context_backfill_through).toBe(original.subagent_context_backfill_through);
    expect(now.subagent_context_capture_since).toMatch(KEY_FORMAT);
    expect(await atOrAfter(now.subagent_context_capture_since, before)).toBe(true);
  });

  it('recomputes a missing backfill_through and keeps a capture_since of another precision as it is', async () => {
    await db.query(`UPDATE k3.kandev_meta SET value = '2026-01-01T00:00:00Z' WHERE key = 'subagent_context_capture_since'`);
    await db.query(`DELETE FROM k3.kandev_meta WHERE key = 'subagent_context_backfill_through'`);
    const result = await backfill(client, 'k3');
    expect(result).toEqual({ status: 'activated', inserted: 0, failure: null,
      capture_since: '2026-01-01T00:00:00Z', backfill_through: '2026-08-12T07:00:00.500000000Z' });
    expect(await keys('k3')).toEqual({
      subagent_context_backfill_through: '2026-08-12T07:00:00.500000000Z',
      subagent_context_capture_since: '2026-01-01T00:00:00Z',
    });
  });
});

describe('a backfill that fails', async () => {
  await db.createHost('k4');
  await history('k4', 's', ['2026-08-12 06:00:00', '2026-08-12 06:00:01']);
  await db.install('k4');
  const client = await db.connect();
  const warnings: string[] = [];
  client.on('notice', (n) => { if (n.severity === 'WARNING') warnings.push(n.message ?? ''); });

  const sabotage = async (table: string, errcode: string) => {
    await db.query(`CREATE FUNCTION k4.sabotage() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'sabotaged' USING ERRCODE = '${errcode}'; END $$`);
    await db.query(`CREATE TRIGGER sabotage BEFORE INSERT ON k4.${table} FOR EACH ROW EXECUTE FUNCTION k4.sabotage()`);
  };
  const removeSabotage = async () => { await db.query(`DROP FUNCTION k4.sabotage() CASCADE`); };

  it('writes no row and no key when storing history fails, reports the step and SQLSTATE, warns', async () => {
    await sabotage('task_session_subagents', 'P0001');
    const result = await backfill(client, 'k4');
    expect(result).toEqual({ status: 'failed', inserted: 0, capture_since: null, backfill_through: null,
      failure: 'step "derive and store history" failed (SQLSTATE P0001): sabotaged' });
    expect(await keys('k4')).toEqual({});
    expect(await rowCount('k4')).toBe(0n);
    expect(await captureTrigger(db.pool, 'k4')).toBe('O');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^subagent-context: backfill failed at step "derive and store history" \(SQLSTATE P0001\): sabotaged;/);
    await removeSabotage();
  });

  it('rolls the stored rows back when writing the keys fails', async () => {
    await sabotage('kandev_meta', '23514');
    const result = await backfill(client, 'k4');
    expect(result.status).toBe('failed');
    expect(result.failure).toBe('step "write activation keys" failed (SQLSTATE 23514): sabotaged');
    expect(await keys('k4')).toEqual({});
    expect(await rowCount('k4')).toBe(0n);
    expect(await captureTrigger(db.pool, 'k4')).toBe('O');
    expect(warnings).toHaveLength(2);
    await removeSabotage();
  });

  it('succeeds on a rerun once the cause is gone', async () => {
    const result = await backfill(client, 'k4');
    expect(result.status).toBe('activated');
    expect(result.inserted).toBe(2);
    expect(result.backfill_through).toBe('2026-08-12T06:00:01.000000000Z');
    expect(Object.keys(await keys('k4'))).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
  });
});

describe('plain node-pg-migrate up', async () => {
  await db.createHost('k5');
  await history('k5', 'n', ['2026-08-12 05:00:00.000007']);

  it('installs and activates: rows backfilled, both keys written', async () => {
    const bin = join(PACKAGE_ROOT, 'node_modules', 'node-pg-migrate', 'bin', 'node-pg-migrate.js');
    await promisify(execFile)(process.execPath, [bin, 'up', '-m', join(PACKAGE_ROOT, 'migrations'),
      '--migrations-table', 'subagent_context_migrations', '--schema', 'k5'],
    { env: { ...process.env, DATABASE_URL: db.url } });
    const { rows } = await db.query(`SELECT name FROM k5.subagent_context_migrations ORDER BY id`);
    expect(rows.map((r) => r.name)).toEqual(MIGRATIONS);
    const written = await keys('k5');
    expect(written.subagent_context_backfill_through).toBe('2026-08-12T05:00:00.000007000Z');
    expect(written.subagent_context_capture_since).toMatch(KEY_FORMAT);
    const stored = await db.query(`SELECT tool_call_id, source FROM k5.task_session_subagents`);
    expect(stored.rows).toEqual([{ tool_call_id: 'toolu_n_0', source: 'backfill' }]);
  });
});
