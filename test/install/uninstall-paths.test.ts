// docs/uninstall.md's three ways out, run as written: plain node-pg-migrate (from a project that installed
// the package, and from a clone), psql, and `subagent-context uninstall` after a removal by hand that
// stopped halfway (a trigger left without its functions and table: every subagent write warns).
// The "installed package" here is a project whose node_modules/subagent-context is this tree (a link);
// package.test.ts runs the same lines from a real packed install.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { blocksUnder, runShell } from '../helpers/doc-blocks.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { inventory } from '../../src/commands/uninstall.js';
import { MIGRATIONS } from '../helpers/migrations.js';

const cli = builtCli();
const byMigrate = await freshDatabase('un_pgm', { from: 'installed' });
const byMigrateClone = await freshDatabase('un_pgm_clone', { from: 'installed' });
const byPsql = await freshDatabase('un_psql', { from: 'installed' });
const halfway = await freshDatabase('un_halfway', { from: 'installed' });
const noTrigger = await freshDatabase('un_no_trigger', { from: 'installed' });

/** A project that installed the package: node_modules/subagent-context and node-pg-migrate's bin. */
const project = mkdtempSync(join(tmpdir(), 'sc-uninstall-'));
afterAll(() => rmSync(project, { recursive: true, force: true }));
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'kandev-ops', private: true }));
mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
symlinkSync(PACKAGE_ROOT, join(project, 'node_modules', 'subagent-context'));
symlinkSync(join(PACKAGE_ROOT, 'node_modules', 'node-pg-migrate'), join(project, 'node_modules', 'node-pg-migrate'));
symlinkSync(join(PACKAGE_ROOT, 'node_modules', 'node-pg-migrate', 'bin', 'node-pg-migrate.js'),
  join(project, 'node_modules', '.bin', 'node-pg-migrate'));

/** The installation's objects in public, as `uninstall` inventories them. */
async function left(db: Awaited<ReturnType<typeof freshDatabase>>) {
  const client = await db.connect();
  return inventory(client, 'public');
}
const NOTHING = { trigger: [], functions: [], types: [], indexes: [], counters: [], keys: [], migrations: [] };

describe('docs/uninstall.md, with plain node-pg-migrate', () => {
  const [command, printed] = blocksUnder('uninstall.md', 'With plain node-pg-migrate');
  /** The documented line for `url`, with the user's URL placeholder replaced. */
  const line = (url: string) => command!.text.replace('postgres://USER@HOST/kandev', url);

  it('the documented line reverts every migration and prints what the doc shows, from an installed package', async () => {
    expect(command!.lang).toBe('sh');
    expect((await left(byMigrate)).migrations).toEqual(MIGRATIONS);
    const r = await runShell(line(byMigrate.url), project, {}, { merged: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(printed!.text);
    expect(r.stderr).toBe('');
    expect(await left(byMigrate)).toMatchObject(NOTHING);
  });

  it('from a clone, with -m migrations as the doc says', async () => {
    const r = await runShell(line(byMigrateClone.url).replace('-m node_modules/subagent-context/migrations', '-m migrations'),
      PACKAGE_ROOT, {}, { merged: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(printed!.text);
    expect(await left(byMigrateClone)).toMatchObject({ ...NOTHING, tables: ['task_session_subagents', 'subagent_context_failures'] });
  });
});

describe('docs/uninstall.md, by hand with psql', () => {
  it('the three documented lines remove everything, the rows and the bookkeeping too', async () => {
    const [block] = blocksUnder('uninstall.md', 'By hand, with psql');
    const r = await runShell(block!.text, project, { DATABASE_URL: byPsql.url });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toBe('');
    expect(await left(byPsql)).toMatchObject({ ...NOTHING, tables: [] });
    const { rows } = await byPsql.query(`SELECT to_regclass('public.subagent_context_migrations') AS t`);
    expect(rows[0].t).toBeNull();
  });
});

describe('subagent-context uninstall removes whatever of the installation it finds', () => {
  it('a trigger left without its functions, table and bookkeeping (a removal by hand that stopped halfway)', async () => {
    // What the 0.2.0 doc's psql lines left: the first failed and rolled back, the optional two ran.
    await halfway.query('DROP TABLE task_session_subagents, subagent_context_failures, subagent_context_migrations');
    const r = await runCli(cli, ['uninstall'], { DATABASE_URL: halfway.url });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp('^removed: the trigger subagent_context_capture, \\d+ functions, the type subagent_context_row, ' +
      'the index subagent_context_recent_messages_idx on task_session_messages, 6 counter sequences, 2 activation keys\n' +
      'uninstalled; data dropped\n$'));
    expect(await left(halfway)).toMatchObject({ ...NOTHING, tables: [] });
    // A message write is quiet again: no capture left to warn.
    const again = await runCli(cli, ['uninstall'], { DATABASE_URL: halfway.url });
    expect(again.stdout).toBe('nothing to uninstall: subagent-context is not installed in schema "public"\n');
  });

  it('functions left without their trigger, in --json', async () => {
    await noTrigger.query('DROP TRIGGER subagent_context_capture ON task_session_messages');
    await noTrigger.query('DELETE FROM subagent_context_migrations');
    const r = await runCli(cli, ['uninstall', '--json'], { DATABASE_URL: noTrigger.url });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(Object.keys(out.removed)).toEqual(['functions', 'types', 'indexes', 'counters', 'keys']);
    expect(out.removed.functions.length).toBeGreaterThan(20);
    expect(out).toMatchObject({ kept: ['task_session_subagents', 'subagent_context_failures'], dropped: [] });
    expect(await left(noTrigger)).toMatchObject(NOTHING);
  });
});
