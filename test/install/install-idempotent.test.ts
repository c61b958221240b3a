// README.md#commands: `subagent-context up` and plain `node-pg-migrate up` with the package's migrations folder both
// install and activate, in any schema; running either again changes nothing at all.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MIGRATIONS, NODE_PG_MIGRATE } from '../helpers/migrations.js';
import { installationShape } from '../helpers/catalog.js';

const run = promisify(execFile);
const db = await freshDatabase('install_idempotent');
const pool = db.pool;

/** History written before installation: two subagent calls (one with two frames) and a plain message. */
async function seedHistory(schema: string) {
  const t = await createTurn(pool, schema, 'hist');
  await insertMessage(pool, schema, {
    id: 'hist-1', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-01 08:00:00', updated_at: '2026-08-01 08:00:05',
    metadata: subagentMetadata({ tool_call_id: 'toolu_h1', status: 'completed', subagent: { total_tokens: 100, model: 'm' } }),
  });
  await insertMessage(pool, schema, {
    id: 'hist-2', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-01 08:01:00.654321',
    metadata: subagentMetadata({ tool_call_id: 'toolu_h2', status: 'pending', subagent: { is_async: true } }),
  });
  await insertMessage(pool, schema, {
    id: 'hist-3', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-01 08:02:00', type: 'message', metadata: '{}',
  });
  return t;
}

/** Everything an installation owns in a schema, as one comparable value (the schema's name hidden). */
const installed = (schema: string) => installationShape(db.pool, schema);

/** The data an installation writes: activation keys (byte for byte), rows, failures, stats, migrations run. */
async function data(schema: string) {
  const q = (sql: string) => db.query(sql.replaceAll('@S', `"${schema}"`)).then((r) => r.rows);
  return {
    meta: await q(`SELECT key, value, convert_to(value, 'UTF8') AS bytes FROM @S.kandev_meta ORDER BY key`),
    rows: await q(`SELECT * FROM @S.task_session_subagents ORDER BY task_session_id, tool_call_id, agent_execution_id`),
    failures: await q(`SELECT * FROM @S.subagent_context_failures ORDER BY id`),
    stats: await q(`SELECT * FROM @S.subagent_context_stats()`),
    migrations: await q(`SELECT id, name, run_on::text FROM @S.subagent_context_migrations ORDER BY id`),
  };
}


/** Plain node-pg-migrate, as a user would run it from the package directory. */
async function plainNodePgMigrate(schema: string) {
  return run(process.execPath, [NODE_PG_MIGRATE, 'up', '-m', 'migrations',
    '--migrations-table', 'subagent_context_migrations', '--schema', schema], {
    cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: db.url }, timeout: 120_000,
  });
}

async function expectActivatedWithHistory(schema: string, t: { session: string; task: string; turn: string }) {
  const d = await data(schema);
  expect(d.migrations.map((m) => m.name)).toEqual(MIGRATIONS);
  expect(d.meta.map((m) => m.key)).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
  expect(d.meta[0].value).toBe('2026-08-01T08:01:00.654321000Z');
  expect(d.meta[1].value).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}000Z$/);
  expect(d.rows.map((r) => [r.tool_call_id, r.source, r.agent_execution_id, r.observed_at])).toEqual([
    ['toolu_h1', 'backfill', 'unknown', '2026-08-01 08:00:00'],
    ['toolu_h2', 'backfill', 'unknown', '2026-08-01 08:01:00.654321'],
  ]);
  const { rows: [h] } = await db.query(`SELECT activated, shortfall, trigger_enabled FROM "${schema}".subagent_context_health()`);
  expect(h).toEqual({ activated: true, shortfall: 0n, trigger_enabled: true });
  // Live capture works in this schema.
  await insertMessage(pool, schema, {
    id: 'live-1', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:00:00',
    metadata: subagentMetadata({ tool_call_id: 'toolu_live', status: 'pending' }),
  });
  const { rows } = await db.query(`SELECT source FROM "${schema}".task_session_subagents WHERE tool_call_id = 'toolu_live'`);
  expect(rows).toEqual([{ source: 'live' }]);
}

let reference: Awaited<ReturnType<typeof installed>>;

describe('subagent-context up', () => {
  it('installs and activates in public; running it again changes nothing', async () => {
    await db.createHost('public');
    const t = await seedHistory('public');
    const first = await db.up('public');
    expect(first.applied).toEqual(MIGRATIONS);
    expect([first.backfill.status, first.backfill.inserted]).toEqual(['activated', 2]);
    await expectActivatedWithHistory('public', t);

    const definitions = await installed('public');
    const before = await data('public');
    for (let i = 0; i < 2; i++) {
      const again = await db.up('public');
      expect(again.applied).toEqual([]);
      expect(again.backfill).toMatchObject({
        status: 'already activated', inserted: 0,
        capture_since: before.meta[1].value, backfill_through: before.meta[0].value,
      });
      expect(await installed('public')).toEqual(definitions);
      expect(await data('public')).toEqual(before);
    }
    reference = await installed('public');
  });

  it('installs into a non-public schema, independent of public', async () => {
    await db.createHost('tenant_up');
    const t = await seedHistory('tenant_up');
    const publicBefore = await data('public');
    const first = await db.up('tenant_up');
    expect([first.applied, first.backfill.status, first.backfill.inserted]).toEqual([MIGRATIONS, 'activated', 2]);
    await expectActivatedWithHistory('tenant_up', t);
    const definitions = await installed('tenant_up');
    const before = await data('tenant_up');
    const again = await db.up('tenant_up');
    expect([again.applied, again.backfill.status]).toEqual([[], 'already activated']);
    expect(await installed('tenant_up')).toEqual(definitions);
    expect(await data('tenant_up')).toEqual(before);
    // Same installation as public's, name for name; and public saw none of this schema's writes.
    expect(await installed('tenant_up')).toEqual(reference);
    const publicAfter = await data('public');
    expect({ ...publicAfter, stats: null }).toEqual({ ...publicBefore, stats: null });
  });
});

describe('plain node-pg-migrate up', () => {
  it.each(['public_npm', 'tenant_npm'])('installs and activates schema %s; running it twice changes nothing', async (schema) => {
    await db.createHost(schema);
    const t = await seedHistory(schema);
    const first = await plainNodePgMigrate(schema);
    expect(first.stdout).toContain('1764680000000_install-capture');
    expect(first.stdout).toContain('1764680000001_activate');
    await expectActivatedWithHistory(schema, t);

    const definitions = await installed(schema);
    const before = await data(schema);
    const second = await plainNodePgMigrate(schema);
    expect(second.stdout).toContain('No migrations to run!');
    expect(await installed(schema)).toEqual(definitions);
    expect(await data(schema)).toEqual(before);

    // Both ways install exactly the same thing.
    expect(await installed(schema)).toEqual(reference);
    // And `subagent-context up` over a node-pg-migrate installation is a no-op too.
    const up = await db.up(schema);
    expect([up.applied, up.backfill.status]).toEqual([[], 'already activated']);
    expect(await data(schema)).toEqual(before);
  });
});
