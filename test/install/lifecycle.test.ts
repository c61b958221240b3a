// Lifecycle: uninstall (plain node-pg-migrate down, and `subagent-context uninstall [--drop-data]`),
// reinstall, and adopting kandev's own table. Upgrades are in upgrade.test.ts.
// Each scenario runs in its own schema of one database, so they cannot see each other.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freshDatabase } from '../helpers/database.js';
import { createKandevSubagentTable, createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { uninstallCommand } from '../../src/commands/uninstall.js';
import { MIGRATIONS_DIR, MIGRATIONS_TABLE, PACKAGE_ROOT } from '../../src/paths.js';
import { quoteIdent } from '#sql';
import { installationShape } from '../helpers/catalog.js';
import { MIGRATIONS } from '../helpers/migrations.js';
import { builtCli, runCli } from '../helpers/cli.js';

const db = await freshDatabase('lifecycle');
const cli = builtCli();
const pool = db.pool;
const run = promisify(execFile);

/** What an installation leaves in a schema, by kind. */
async function installed(schema: string) {
  const q = async (sql: string) => (await db.query(sql, [schema])).rows.map((r) => r.name as string).sort();
  return {
    trigger: await q(`SELECT t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal`),
    functions: await q(`SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                         WHERE n.nspname = $1`),
    sequences: await q(`SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                         WHERE n.nspname = $1 AND c.relkind = 'S' AND c.relname LIKE 'subagent_context%'
                           AND NOT c.relname IN ('subagent_context_failures_id_seq', 'subagent_context_migrations_id_seq')`),
    // Nothing of ours may stay on kandev's own tables (indexes included).
    hostIndexes: await q(`SELECT i.relname AS name FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                           JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
                           WHERE n.nspname = $1 AND t.relname IN ('task_session_messages', 'kandev_meta', 'tasks',
                             'task_sessions', 'task_session_turns') AND i.relname LIKE 'subagent%'`),
    // node-pg-migrate's bookkeeping table stays (empty) after a full down; a reinstall reuses it.
    migrations: (await db.query(`SELECT name FROM ${quoteIdent(schema)}.${MIGRATIONS_TABLE} ORDER BY name`)).rows
      .map((r) => r.name as string),
    types: await q(`SELECT t.typname AS name FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                     WHERE n.nspname = $1 AND t.typname = 'subagent_context_row'`),
    tables: await q(`SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = $1 AND c.relkind = 'r'
                        AND c.relname IN ('task_session_subagents', 'subagent_context_failures')`),
    keys: (await db.query(`SELECT key FROM ${quoteIdent(schema)}.kandev_meta WHERE key LIKE 'subagent_context%' ORDER BY key`))
      .rows.map((r) => r.key as string),
  };
}

/** One subagent call written as kandev does (INSERT pending, UPDATE completed). */
async function writeCall(schema: string, key: string, tokens: number, at = '2026-08-12 09:00:00') {
  const t = await createTurn(pool, schema, key, at);
  await insertMessage(pool, schema, {
    id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn, created_at: at, updated_at: at,
    metadata: subagentMetadata({ tool_call_id: `toolu_${key}`, status: 'pending', subagent: { subagent_type: 'explorer' } }),
  });
  await updateMessage(pool, schema, `msg-${key}`, subagentMetadata({
    tool_call_id: `toolu_${key}`, status: 'completed',
    subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: tokens },
  }), at.replace(':00:00', ':00:05'));
  return t;
}

async function rows(schema: string) {
  const { rows } = await db.query(
    `SELECT id, tool_call_id, agent_execution_id, source, total_tokens, tool_status
       FROM ${quoteIdent(schema)}.task_session_subagents ORDER BY tool_call_id, agent_execution_id`);
  return rows;
}

async function health(schema: string) {
  return (await db.query(`SELECT * FROM ${quoteIdent(schema)}.subagent_context_health()`)).rows[0];
}

function uninstall(schema: string, dropData = false) {
  return uninstallCommand.run({
    databaseUrl: db.url, schema, json: false, verbose: false,
    args: dropData ? { 'drop-data': true } : {}, positionals: [],
  });
}

const NOTHING_INSTALLED = { trigger: [], functions: [], sequences: [], types: [], keys: [], migrations: [], hostIndexes: [] };

describe('plain node-pg-migrate down', () => {
  const schema = 'lc_pgm_down';
  const pgm = (...args: string[]) => run(process.execPath, [
    join(PACKAGE_ROOT, 'node_modules/node-pg-migrate/bin/node-pg-migrate.js'), ...args,
    '-m', MIGRATIONS_DIR, '-t', MIGRATIONS_TABLE, '-s', schema],
  { env: { ...process.env, DATABASE_URL: db.url } });

  it('`down` reverts activation only; `down N` (every migration) removes trigger, functions, sequences and type, keeps the rows', async () => {
    await db.createHost(schema);
    await pgm('up');
    expect((await health(schema)).activated).toBe(true);
    await writeCall(schema, 'pgm1', 300);
    const before = await rows(schema);
    expect(before).toEqual([expect.objectContaining({ tool_call_id: 'toolu_pgm1', source: 'live', total_tokens: 300n })]);

    await pgm('down');  // the last migration: activation (keys gone, capture still installed)
    let now = await installed(schema);
    expect(now.keys).toEqual([]);
    expect(now.trigger).toEqual(['subagent_context_capture']);
    expect((await health(schema)).activated).toBe(false);

    await pgm('down', String(MIGRATIONS.length - 1));  // what is left: the installation itself
    now = await installed(schema);
    expect({ ...now, tables: undefined }).toEqual({ ...NOTHING_INSTALLED, tables: undefined });
    expect(now.tables).toEqual(['subagent_context_failures', 'task_session_subagents']);
    expect(await rows(schema)).toEqual(before);

    // Messages still write, and nothing captures them any more.
    await writeCall(schema, 'pgm2', 400);
    expect(await rows(schema)).toEqual(before);
  });
});

describe('subagent-context uninstall', () => {
  it('removes trigger, functions and activation keys; keeps rows and failure log; message writes go on uncaptured', async () => {
    const schema = 'lc_uninstall';
    await db.createHost(schema);
    await db.up(schema);
    await writeCall(schema, 'u1', 100);
    const before = await rows(schema);
    expect(before).toHaveLength(1);
    expect(await uninstall(schema)).toBe(0);
    const now = await installed(schema);
    expect({ ...now, tables: undefined }).toEqual({ ...NOTHING_INSTALLED, tables: undefined });
    expect(now.tables).toEqual(['subagent_context_failures', 'task_session_subagents']);
    expect(await rows(schema)).toEqual(before);
    await writeCall(schema, 'u2', 200);
    expect(await rows(schema)).toEqual(before);
    // Uninstalling twice is harmless.
    expect(await uninstall(schema)).toBe(0);
  });

  it('--drop-data also drops the rows and the failure log, and nothing of kandev', async () => {
    const schema = 'lc_drop';
    await db.createHost(schema);
    await db.up(schema);
    await writeCall(schema, 'd1', 100);
    expect(await uninstall(schema, true)).toBe(0);
    expect(await installed(schema)).toEqual({ ...NOTHING_INSTALLED, tables: [] });
    const { rows: host } = await db.query(
      `SELECT (SELECT count(*) FROM ${quoteIdent(schema)}.task_session_messages) AS messages,
              (SELECT count(*) FROM ${quoteIdent(schema)}.task_sessions) AS sessions`);
    expect(host[0]).toEqual({ messages: 1n, sessions: 1n });
  });

  it('reinstall after uninstall resumes capture: the gap is backfilled, nothing is duplicated, health is clean', async () => {
    const schema = 'lc_reinstall';
    await db.createHost(schema);
    await db.up(schema);
    await writeCall(schema, 'r1', 100);
    const [first] = await rows(schema);
    expect(await uninstall(schema)).toBe(0);
    // Written while nothing captured: a new call, and a new frame of the old call.
    await writeCall(schema, 'r2', 200, '2026-08-12 10:00:00');
    await updateMessage(pool, schema, 'msg-r1', subagentMetadata({
      tool_call_id: 'toolu_r1', status: 'completed', subagent: { status: 'completed', total_tokens: 150 },
    }), '2026-08-12 10:30:00');

    const result = await db.up(schema);
    expect(result.backfill).toMatchObject({ status: 'activated', inserted: 1 });
    // The stored row wins over history (docs/decisions.md#history-paths: a live row always survives the backfill) ...
    expect(await rows(schema)).toEqual([
      { ...first },
      expect.objectContaining({ tool_call_id: 'toolu_r2', agent_execution_id: 'unknown', source: 'backfill', total_tokens: 200n }),
    ]);
    // ... and live capture merges into it again, on the same row.
    await updateMessage(pool, schema, 'msg-r1', subagentMetadata({
      tool_call_id: 'toolu_r1', status: 'completed', subagent: { status: 'completed', total_tokens: 175 },
    }), '2026-08-12 11:00:00');
    await writeCall(schema, 'r3', 300, '2026-08-12 12:00:00');
    const after = await rows(schema);
    expect(after.map((r) => [r.tool_call_id, r.source, r.total_tokens])).toEqual([
      ['toolu_r1', 'live', 175n], ['toolu_r2', 'backfill', 200n], ['toolu_r3', 'live', 300n]]);
    expect(after[0].id).toBe(first.id);
    const h = await health(schema);
    expect(h).toMatchObject({ activated: true, shortfall: 0n, trigger_enabled: true, collisions: 0n });
  });
});

describe('installing over a table kandev created itself (kandev >= 0.89)', () => {
  it('`up` says it adopted the table, once, and what two writers mean; --json carries it as notices', async () => {
    const schema = 'lc_adopt_said';
    await db.createHost(schema);
    await createKandevSubagentTable(db.pool, schema);
    const r = await runCli(cli, ['up', '--database-url', db.url, '--schema', schema]);
    expect(r.code, r.stderr).toBe(0);
    const notes = r.stdout.split('\n').filter((l) => l.startsWith('note: '));
    expect(notes).toEqual(['note: adopted the existing task_session_subagents; widened total_tokens, tool_use_count, ' +
      'duration_ms from integer to bigint. kandev >= 0.89 writes that table too, from its own process: while both write, ' +
      'every subagent is recorded twice, once per execution id. Use one writer (docs/install.md)']);
    // Installing again adopts nothing new and says nothing; a fresh schema's own table is never "adopted".
    const again = await runCli(cli, ['up', '--json', '--database-url', db.url, '--schema', schema]);
    expect(JSON.parse(again.stdout).notices).toEqual([]);
    await db.createHost('lc_fresh_said');
    const fresh = await runCli(cli, ['up', '--json', '--database-url', db.url, '--schema', 'lc_fresh_said']);
    expect(JSON.parse(fresh.stdout).notices).toEqual([]);
  });

  it('installed again after uninstall (the table kept, already bigint): the note once', async () => {
    const schema = 'lc_adopt_again';
    await db.createHost(schema);
    await createKandevSubagentTable(db.pool, schema);
    expect((await runCli(cli, ['up', '--database-url', db.url, '--schema', schema])).code).toBe(0);
    expect((await runCli(cli, ['uninstall', '--database-url', db.url, '--schema', schema])).code).toBe(0);
    const r = await runCli(cli, ['up', '--database-url', db.url, '--schema', schema]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').filter((l) => l.startsWith('note: '))).toEqual(['note: adopted the existing task_session_subagents ' +
      'unchanged. kandev >= 0.89 writes that table too, from its own process: while both write, every subagent is recorded twice, ' +
      'once per execution id. Use one writer (docs/install.md)']);
  });

  it('adopts it: rows kept, integer metrics widened to bigint, capture merges into the kandev rows', async () => {
    const schema = 'lc_adopt';
    await db.createHost(schema);
    const s = quoteIdent(schema);
    await createKandevSubagentTable(db.pool, schema);
    const t = await createTurn(pool, schema, 'k1');
    await db.query(`INSERT INTO ${s}.task_session_subagents
      (id, task_session_id, task_id, turn_id, tool_call_id, total_tokens, observed_at, updated_at)
      VALUES ('kandev-row', $1, $2, $3, 'toolu_k1', 2000000000, '2026-08-12 08:00:00', '2026-08-12 08:00:00')`,
    [t.session, t.task, t.turn]);

    const result = await db.up(schema);
    expect(result.backfill.status).toBe('activated');
    const { rows: types } = await db.query(
      `SELECT column_name, data_type FROM information_schema.columns
        WHERE table_schema = $1 AND table_name = 'task_session_subagents'
          AND column_name IN ('total_tokens', 'tool_use_count', 'duration_ms') ORDER BY column_name`, [schema]);
    expect(types).toEqual([
      { column_name: 'duration_ms', data_type: 'bigint' },
      { column_name: 'tool_use_count', data_type: 'bigint' },
      { column_name: 'total_tokens', data_type: 'bigint' }]);
    // kandev's table stays kandev's: --drop-data refuses, in one sentence, and removes nothing at all.
    const shape = await installationShape(db.pool, schema);
    const refused = await runCli(cli, ['uninstall', '--drop-data', '--database-url', db.url, '--schema', schema]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('was not created by subagent-context (kandev created it and the install adopted it), so --drop-data drops nothing');
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(await installationShape(db.pool, schema)).toEqual(shape);
    // A value beyond integer now fits, and it lands on kandev's own row (same key, execution 'unknown').
    await insertMessage(pool, schema, {
      id: 'msg-k1', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:00:00',
      metadata: subagentMetadata({ tool_call_id: 'toolu_k1', status: 'completed', subagent: { total_tokens: 3000000000 } }),
    });
    expect(await rows(schema)).toEqual([{
      id: 'kandev-row', tool_call_id: 'toolu_k1', agent_execution_id: 'unknown', source: 'live',
      total_tokens: 3000000000n, tool_status: 'completed' }]);
  });
});
