// The upgrade window (docs/upgrade.md#the-upgrade-window): operators install the new package first and
// run `up` later, while cron checks, dashboards and the exporter keep calling. Every release in the field
// is installed from its own commit, and every command of this one answers before `up` in one sentence
// (both releases named, `up` named), exits 3, prints no SQL error, and writes nothing; `metrics` stays
// up with the upgrade asked for; `uninstall` removes any earlier release. An older CLI on a newer
// installation is one sentence too.
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { schemaContents } from '../helpers/catalog.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_VERSION, quoteIdent } from '#sql';

const db = await freshDatabase('upgrade_window');
const cli = builtCli();
const dir = mkdtempSync(join(tmpdir(), 'sc-window-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const html = join(dir, 'report.html');

/** kandev's tables with one subagent of history in `schema`, then `install` run on them. */
async function installed(schema: string, install: () => Promise<unknown>) {
  await db.createHost(schema);
  const t = await createTurn(db.pool, schema, schema, '2026-08-01 08:00:00');
  await insertMessage(db.pool, schema, { id: `msg-${schema}`, session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-08-01 08:00:00', metadata: subagentMetadata({ tool_call_id: `toolu_${schema}`, status: 'completed',
      subagent: { subagent_type: 'explorer', total_tokens: 10 } }) });
  await install();
}

const run = (schema: string, args: string[]) => runCli(cli, [...args, '--schema', schema], { DATABASE_URL: db.url });

/** Every command that reads or writes an installation, in every output format. */
const COMMANDS = [
  ['health'], ['health', '--json'], ['health', '--full'],
  ['report'], ['report', '--json'], ['report', '--html', html],
  ['repair'], ['backfill'],
].map((args) => ({ args, command: args.join(' ').replace(html, 'FILE') }));

describe.each(RELEASES)('$version installed ($commit), this release\'s CLI before `up`', async (release) => {
  const schema = `window_${release.version.replaceAll('.', '_')}`;
  await installed(schema, () => installRelease(release, db.url, schema));
  const sentence = `subagent-context ${release.version} is installed in schema "${schema}" and this is ${PACKAGE_VERSION}: ` +
    'run `subagent-context up` to upgrade it in place (docs/upgrade.md).';
  const before = await schemaContents(db.pool, schema);

  it.each(COMMANDS)('$command: one sentence naming both releases and `up`, exit 3', async ({ args }) => {
    const r = await run(schema, args);
    expect(r.stderr).toBe(`error: ${sentence}\n`);
    expect(r.code).toBe(3);
    if (args.includes('--json') && args[0] === 'health') {
      expect(JSON.parse(r.stdout)).toEqual({ status: 'upgrade_required', installed_version: release.version,
        package_version: PACKAGE_VERSION, error: sentence });
    } else {
      expect(r.stdout).toBe('');
    }
    expect(existsSync(html)).toBe(false);
  });

  it('metrics: up 1, the upgrade required, the installed release named', async () => {
    const r = await run(schema, ['metrics', '--once']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`subagent_context_up{schema="${schema}"} 1\n`);
    expect(r.stdout).toContain(`subagent_context_upgrade_required{schema="${schema}"} 1\n`);
    expect(r.stdout).toContain(`installed_version="${release.version}"`);
    // The installed release's own verdict and shortfall, so its alerts fire before `up` (0.1.0 has no verdict).
    // On 4259581, 0.2.0 and 0.3.0 served neither (this release's query needs a function they do not have).
    if (release.version === '0.1.0') {
      expect(r.stdout).not.toContain('subagent_context_status{');
    } else {
      expect(r.stdout).toMatch(new RegExp(`^subagent_context_status\\{schema="${schema}",status="(healthy|idle)"\\} 1$`, 'm'));
      expect(r.stdout).toContain(`subagent_context_shortfall{schema="${schema}"} 0\n`);
      expect(r.stdout).not.toContain('# scrape error');
    }
  });

  it('none of them wrote anything: catalog, rows and counters as they were', async () => {
    expect(await schemaContents(db.pool, schema)).toEqual(before);
  });

  it('uninstall removes the earlier release, and keeps its rows', async () => {
    const rows = (await db.query(`SELECT id, tool_call_id FROM ${quoteIdent(schema)}.task_session_subagents ORDER BY id`)).rows;
    const r = await run(schema, ['uninstall']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^removed: the trigger subagent_context_capture, \d+ functions, .*\nuninstalled; kept task_session_subagents and subagent_context_failures\n$/);
    const health = await run(schema, ['health', '--json']);
    expect([health.code, JSON.parse(health.stdout).status]).toEqual([2, 'not_installed']);
    expect((await db.query(`SELECT id, tool_call_id FROM ${quoteIdent(schema)}.task_session_subagents ORDER BY id`)).rows).toEqual(rows);
  });
});

describe('a newer release installed, this release\'s CLI', async () => {
  // A release after this one, as its installation records itself (sql/data/installation-record.sql's record).
  const [major, minor] = PACKAGE_VERSION.split('.').map(Number);
  const newer = `${major}.${minor! + 1}.0`;
  const schema = 'window_newer';
  await installed(schema, async () => {
    await db.up(schema);
    await db.query(`UPDATE ${quoteIdent(schema)}.subagent_context_installed SET version = $1, code_digest = 'newer'`, [newer]);
  });
  const sentence = `subagent-context ${newer} is installed in schema "${schema}", newer than this ${PACKAGE_VERSION}: ` +
    `run subagent-context ${newer} or later, or go back as docs/upgrade.md#rolling-back says.`;
  const before = await schemaContents(db.pool, schema);

  const ALL = [...COMMANDS, ...['up', 'uninstall'].map((command) => ({ args: [command], command }))];
  it.each(ALL)('$command: one sentence naming both releases, exit 3', async ({ args }) => {
    const r = await run(schema, args);
    expect(r.stderr).toBe(`error: ${sentence}\n`);
    expect(r.code).toBe(3);
    if (args.includes('--json') && args[0] === 'health') {
      expect(JSON.parse(r.stdout)).toMatchObject({ status: 'upgrade_required', installed_version: newer, package_version: PACKAGE_VERSION });
    } else {
      expect(r.stdout).toBe('');
    }
  });

  it('metrics keeps serving: up 1, the release installed named, the mismatch flagged', async () => {
    const r = await run(schema, ['metrics', '--once']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`subagent_context_up{schema="${schema}"} 1\n`);
    expect(r.stdout).toContain(`subagent_context_upgrade_required{schema="${schema}"} 1\n`);
    expect(r.stdout).toContain(`installed_version="${newer}",package_version="${PACKAGE_VERSION}"`);
  });

  it('none of them wrote anything', async () => {
    expect(await schemaContents(db.pool, schema)).toEqual(before);
  });
});
