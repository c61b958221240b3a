// docs/upgrade.md › Rolling back, run as written, from this release back to every release in the field:
// its first block with this release's CLI where an operator runs it (a project that installed the
// package), its second in a clone of the repository that checks out the earlier release's commit and
// builds it. Then: every row kept with its id and nothing duplicated, what was written between the two
// blocks backfilled, the activation keys written again, the earlier release recorded and capturing, and
// its own health healthy.
// Only the network is stood in for: `npm ci` finds the clone's node_modules already linked to this
// tree's, and the doc's database URL and 0.3.0's commit are replaced by the test's database and each
// release's commit.
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli } from '../helpers/cli.js';
import { blocksUnder, runShell } from '../helpers/doc-blocks.js';
import { RELEASES } from '../helpers/releases.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { utcTimestamp } from '../../src/timestamp.js';

const [uninstallBlock, olderBlock] = blocksUnder('upgrade.md', 'Rolling back');
const DOC_COMMIT = '8c1724b';
const DOC_URL = 'postgres://USER@HOST/kandev';

/** Where the operator works: a project with this release installed (its CLI), and beside it the clones. */
const work = mkdtempSync(join(tmpdir(), 'sc-rollback-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'kandev-ops', private: true }));
mkdirSync(join(work, 'node_modules', '.bin'), { recursive: true });
const bin = join(work, 'node_modules', '.bin', 'subagent-context');
writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${builtCli()}" "$@"\n`);
chmodSync(bin, 0o755);
/** `npm ci` needs the registry; the clone's node_modules are this tree's, linked before the block runs. */
const NO_NETWORK = 'npm() { if [ "$1" = ci ]; then return 0; fi; command npm "$@"; }\n';

/** One subagent message written now, as kandev writes it (created_at is the UTC wall clock). */
async function subagent(db: Awaited<ReturnType<typeof freshDatabase>>, key: string) {
  const at = utcTimestamp();
  const t = await createTurn(db.pool, 'public', key, at);
  await insertMessage(db.pool, 'public', { id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn, created_at: at, updated_at: at,
    metadata: subagentMetadata({ tool_call_id: `toolu_${key}`, status: 'completed', subagent: { subagent_type: 'explorer', total_tokens: 7 } }) });
}

describe('the documented blocks', () => {
  it('are two sh blocks: this release\'s uninstall, then the earlier release built at its commit, its up and its health', () => {
    expect([uninstallBlock?.lang, olderBlock?.lang]).toEqual(['sh', 'sh']);
    expect(uninstallBlock!.text).toContain(`npx subagent-context uninstall --database-url ${DOC_URL}`);
    expect(olderBlock!.text).toContain(`git checkout ${DOC_COMMIT}`);
    expect(olderBlock!.text).toContain(`npx subagent-context up --database-url ${DOC_URL}`);
  });
});

// Sequential: each builds a release, and the machine has two cores.
describe.each(RELEASES)('back to $version ($commit), as docs/upgrade.md says', { timeout: 300_000 }, async (release) => {
  const db = await freshDatabase(`rollback_${release.version.replaceAll('.', '_')}`, { from: 'installed' });
  await subagent(db, 'before');
  const rows = async () => (await db.query(`SELECT id, task_session_id, tool_call_id FROM task_session_subagents ORDER BY id`)).rows;
  const keys = async () => (await db.query(`SELECT key, value FROM kandev_meta WHERE key LIKE 'subagent_context%' ORDER BY key`)).rows;
  const before = await rows();
  const keysBefore = await keys();
  const dir = join(work, release.version);
  mkdirSync(dir);
  execFileSync('git', ['clone', '-q', '--shared', PACKAGE_ROOT, join(dir, 'subagent-context')]);
  symlinkSync(join(PACKAGE_ROOT, 'node_modules'), join(dir, 'subagent-context', 'node_modules'));
  const block = (text: string) => NO_NETWORK + text.replaceAll(DOC_URL, db.url).replaceAll(DOC_COMMIT, release.commit);

  it('step 1, this release\'s uninstall where it is installed: its code goes, the rows stay', async () => {
    const r = await runShell(block(uninstallBlock!.text), work, {});
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^removed: .*\nuninstalled; kept task_session_subagents and subagent_context_failures\n$/);
    expect(await rows()).toEqual(before);
    await subagent(db, 'between');  // nothing captures now
  });

  it(`step 2, ${release.version} built at its commit: its up and its health succeed`, async () => {
    // A symlinked node_modules is untracked in the clone (.gitignore), so the checkout keeps it.
    const r = await runShell(block(olderBlock!.text), dir, {});
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toMatch(/installed and activated\n/);
    expect(r.stdout).toMatch(/^subagent-context health \(schema public\): idle$/m);
  });

  it(`${release.version} is what is installed, with its own migrations`, async () => {
    const migrations = execFileSync('git', ['-C', PACKAGE_ROOT, 'ls-tree', '--name-only', release.commit, 'migrations/'], { encoding: 'utf8' })
      .split('\n').filter((f) => /^migrations\/\d+_.*\.js$/.test(f)).map((f) => f.replace(/^migrations\/|\.js$/g, '')).sort();
    expect((await db.query('SELECT name FROM subagent_context_migrations ORDER BY id')).rows.map((r) => r.name)).toEqual(migrations);
    const { rows: [installed] } = await db.query(`SELECT to_regprocedure('public.subagent_context_installation()') IS NOT NULL AS recorded`);
    if (release.version === '0.1.0') expect(installed.recorded).toBe(false);  // 0.1.0 recorded nothing
    else expect((await db.query('SELECT version FROM subagent_context_installation()')).rows[0].version).toBe(release.version);
  });

  it('every row kept with its id, what was written in between backfilled, nothing duplicated; the keys written again', async () => {
    const after = await rows();
    expect(after.filter((r) => r.tool_call_id !== 'toolu_between')).toEqual(before);
    expect(after.filter((r) => r.tool_call_id === 'toolu_between')).toHaveLength(1);
    const { rows: [dup] } = await db.query(`SELECT count(*)::int AS n FROM (SELECT 1 FROM task_session_subagents
      GROUP BY task_session_id, tool_call_id HAVING count(*) > 1) AS d`);
    expect(dup.n).toBe(0);
    const keysAfter = await keys();
    expect(keysAfter.map((k) => k.key)).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    // Re-activation: capture_since is the earlier release's up, later than the first one.
    const since = (k: typeof keysAfter) => Date.parse(k.find((x) => x.key === 'subagent_context_capture_since')!.value);
    expect(since(keysAfter)).toBeGreaterThan(since(keysBefore));
  });

  it(`${release.version} captures, and its own health says healthy`, async () => {
    await subagent(db, 'after');
    const { rows: [row] } = await db.query(`SELECT source FROM task_session_subagents WHERE tool_call_id = 'toolu_after'`);
    expect(row).toEqual({ source: 'live' });
    const r = await runShell(`npx subagent-context health --json --database-url '${db.url}'`, join(dir, 'subagent-context'), {});
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'healthy', shortfall: 0, activated: true });
  });
});
