// The trust boundary (docs/security.md#the-trust-boundary): kandev's application role owns schema public and
// kandev's tables, and plants there look-alikes of every built-in function, aggregate and operator our
// statements name (generated: test/helpers/lookalikes.ts). A superuser then runs every command as the docs
// say; no look-alike may run, and the application role must stay NOSUPERUSER.
//
// On 4259581 every command called a planted format() as the superuser (up about 2,000 times) and made the
// application role SUPERUSER.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { freshDatabase, writeUncaptured } from '../helpers/database.js';
import { dropHostRole, hostRoleOwningPublic } from '../helpers/host-role.js';
import { builtCli, runCli, type CliResult } from '../helpers/cli.js';
import { NODE_PG_MIGRATE } from '../helpers/migrations.js';
import { lookalikeCalls, plantLookalikes, resetLookalikeCalls } from '../helpers/lookalikes.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const db = await freshDatabase('trust_boundary', { from: 'host' });
const cli = builtCli();
const env = { DATABASE_URL: db.url };
let admin: pg.Client;
let app: string;
const dir = mkdtempSync(join(tmpdir(), 'trust-boundary-'));

const frame = (n: number) => subagentMetadata({ tool_call_id: `toolu_${n}`, status: 'completed', subagent: { subagent_type: 'Explore' } });

beforeAll(async () => {
  admin = await db.connect();
  // The test's own statements must not call the look-alikes either (a test-only session: SET is fine here).
  await admin.query('SET search_path = pg_catalog, pg_temp');
  app = await hostRoleOwningPublic(admin);
  // History for the backfill, written before anything is installed.
  const t = await createTurn(admin, 'public', 'trust');
  for (let i = 0; i < 5; i++) {
    await insertMessage(admin, 'public', { id: `m-history-${i}`, session: t.session, task: t.task, turn: t.turn, metadata: frame(i) });
  }
  const planted = await plantLookalikes(admin, app);
  // A generator that planted nothing would pass on anything.
  expect(planted.functions).toBeGreaterThan(1000);
  expect(planted.operators).toBeGreaterThan(100);
}, 300_000);

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  // The role owns objects of the file's database only, which is dropped after the file: drop them first.
  const c = await db.connect();
  await dropHostRole(c, app);
  await c.end();
});

/** Runs `command`, then returns what ran of the look-alikes and whether the application role became a superuser. */
async function afterRunning(command: () => Promise<CliResult>) {
  await resetLookalikeCalls(admin);
  const result = await command();
  const { queries, ...calls } = await lookalikeCalls(admin);
  if (queries.length) console.warn(`look-alikes called by:\n${queries.join('\n---\n')}`);
  const { rows: [{ rolsuper }] } = await admin.query('SELECT rolsuper FROM pg_roles WHERE rolname = $1', [app]);
  if (rolsuper) await admin.query(`ALTER ROLE ${app} NOSUPERUSER`);
  return { result, calls, rolsuper };
}

const plainNodePgMigrate = (): Promise<CliResult> => promisify(execFile)(process.execPath,
  [NODE_PG_MIGRATE, 'up', '-m', 'migrations', '--migrations-table', 'subagent_context_migrations', '--schema', 'public'],
  { cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: db.url }, timeout: 240_000 })
  .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), (err) => ({ code: err.code ?? 1, stdout: err.stdout, stderr: err.stderr }));

const commands: [string, () => Promise<CliResult>, number[]][] = [
  ['up', () => runCli(cli, ['up'], env), [0]],
  // A subagent the trigger never saw: health finds a shortfall, repair has work.
  ['(a missed write)', async () => {
    const t = await createTurn(admin, 'public', 'trust');
    await writeUncaptured(db, 'public', { id: 'm-missed', session: t.session, task: t.task, turn: t.turn, metadata: frame(99) });
    await insertMessage(admin, 'public', { id: 'm-live', session: t.session, task: t.task, turn: t.turn, metadata: frame(98) });
    return { code: 0, stdout: '', stderr: '' };
  }, [0]],
  ['health', () => runCli(cli, ['health'], env), [0, 1]],
  ['health --json', () => runCli(cli, ['health', '--json'], env), [0, 1]],
  ['health --full', () => runCli(cli, ['health', '--full'], env), [0, 1]],
  ['repair', () => runCli(cli, ['repair'], env), [0]],
  ['report', () => runCli(cli, ['report'], env), [0]],
  ['report --json', () => runCli(cli, ['report', '--json'], env), [0]],
  ['report --html', () => runCli(cli, ['report', '--html', join(dir, 'report.html')], env), [0]],
  ['metrics --once', () => runCli(cli, ['metrics', '--once'], env), [0]],
  ['backfill', () => runCli(cli, ['backfill'], env), [0]],
  ['uninstall', () => runCli(cli, ['uninstall'], env), [0]],
];

/**
 * node-pg-migrate's own statements, before any migration of ours, run under its --schema search_path: on a
 * run where its bookkeeping table exists it checks the primary key with `constraint_type = 'PRIMARY KEY'`,
 * a varchar-based information_schema column against a literal, for which pg_catalog has no exact operator,
 * so a planted `=(varchar, text)` is chosen (docs/security.md#the-trust-boundary says so and what to do).
 */
const NODE_PG_MIGRATE_OWN = 'character varying = text';

describe('look-alikes planted by the schema-owning application role', () => {
  for (const [name, command, codes] of commands) {
    it(`${name}: runs none of them, and the role stays NOSUPERUSER`, async () => {
      const { result, calls, rolsuper } = await afterRunning(command);
      expect({ calls, rolsuper }).toEqual({ calls: { count: 0, names: [] }, rolsuper: false });
      expect(codes, `${name} exited ${result.code}: ${result.stderr}${result.stdout}`).toContain(result.code);
    }, 300_000);
  }

  it('plain node-pg-migrate up: runs none of ours; its own bookkeeping check is the documented exception', async () => {
    // The look-alike answers NULL, so node-pg-migrate then stops on its own bookkeeping: no migration of ours ran.
    const { calls } = await afterRunning(plainNodePgMigrate);
    expect(calls.names).toEqual([`${NODE_PG_MIGRATE_OWN} by postgres`]);
    // Without the look-alikes of that one comparison (varchar on the left), nothing planted runs.
    await admin.query(`DO $drop$ DECLARE o regoperator; BEGIN
      FOR o IN SELECT oid::regoperator FROM pg_operator WHERE oprnamespace = 'public'::regnamespace
                 AND oprname = '=' AND oprleft = 'varchar'::regtype LOOP
        EXECUTE 'DROP OPERATOR ' || o::text;  -- qualified: public is not on this session's path
      END LOOP; END $drop$`);
    await runCli(cli, ['uninstall'], env);
    const again = await afterRunning(plainNodePgMigrate);
    expect({ calls: again.calls, rolsuper: again.rolsuper }).toEqual({ calls: { count: 0, names: [] }, rolsuper: false });
    expect(again.result.code, again.result.stderr).toBe(0);
    const last = await afterRunning(() => runCli(cli, ['uninstall'], env));
    expect({ calls: last.calls, rolsuper: last.rolsuper, code: last.result.code }).toEqual({ calls: { count: 0, names: [] }, rolsuper: false, code: 0 });
  }, 600_000);
});
