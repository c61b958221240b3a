// A new operator's afternoon, in one file: a fresh clone (git clone of this repository's HEAD, with this
// tree's node_modules linked in place of `npm ci`) followed through README and docs as written: build,
// install (install.md), upgrade from 0.1.0 (upgrade.md), health, a missed subagent and repair
// (health.md), report, metrics judged by the shipped alert rules (promtool), then uninstall by the CLI,
// by plain node-pg-migrate and by psql (uninstall.md), reinstalling in between. Each step's output is
// compared with what the docs say it prints, where they show it; docs-commands.test.ts checks every
// console block, this file checks that the steps fit together from a clone.
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { blocksUnder, runShell } from '../helpers/doc-blocks.js';
import { firingAlerts, PROMTOOL } from '../helpers/alert-rules.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { planTraffic } from '../../kandev/traffic-plan.js';
import { writeHistory } from '../../kandev/traffic-write.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';

const work = mkdtempSync(join(tmpdir(), 'sc-walkthrough-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const clone = join(work, 'subagent-context');
const fresh = await freshDatabase('walk_fresh', { from: 'host' });
const old = await freshDatabase('walk_upgrade', { from: 'host' });
const promtool = PROMTOOL;

/** `npx subagent-context …` in the clone, as install.md's "From a clone" runs it. */
const sc = (db: { url: string }, ...args: string[]) =>
  runShell(`npx --no-install subagent-context ${args.map((a) => `'${a}'`).join(' ')}`, clone, { DATABASE_URL: db.url });

/** The alerts the clone's shipped rules fire on a scrape repeated for an hour (promtool's output captured). */
const firing = (metrics: string) => firingAlerts(join(clone, 'alerts', 'subagent-context.rules.yml'), metrics);

// Each step runs several commands in a row (a build, npx start-ups): minutes on a busy machine.
describe('a fresh clone, followed through the docs', { timeout: 300_000 }, () => {
  it('builds as install.md says (npm ci is the link to this tree\'s node_modules)', async () => {
    execFileSync('git', ['clone', '-q', PACKAGE_ROOT, clone]);
    symlinkSync(join(PACKAGE_ROOT, 'node_modules'), join(clone, 'node_modules'));
    const [fromClone] = blocksUnder('install.md', 'Getting the package');
    expect(fromClone!.text).toContain('npm ci && npm run build');
    const build = await runShell('npm run build --silent', clone, {});
    expect(build.code, build.stderr).toBe(0);
    const version = await sc(fresh, '--version');
    expect(version.stdout.trim()).toBe(JSON.parse(execFileSync('git', ['-C', clone, 'show', 'HEAD:package.json'], { encoding: 'utf8' })).version);
  });

  it('install: up on kandev\'s history backfills it and activates (install.md)', async () => {
    const client = await fresh.connect();
    await writeHistory(client, 'public', planTraffic({ invalidJson: false }));
    const up = await sc(fresh, 'up');
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toMatch(/^backfill: activated\n {2}rows backfilled {3}87\n/m);
    expect(up.stdout).toMatch(/^installed and activated$/m);
  });

  it('upgrade: up on a database 0.1.0 installed upgrades it in place (upgrade.md)', async () => {
    const release = RELEASES.find((r) => r.version === '0.1.0')!;
    await installRelease(release, old.url, 'public');
    const up = await sc(old, 'up');
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toMatch(/^upgraded in place: 0\.1\.0 -> \d+\.\d+\.\d+ \(PostgreSQL \d+\); rows, keys and counters kept$/m);
    const health = await sc(old, 'health', '--json');
    expect(JSON.parse(health.stdout)).toMatchObject({ installed_version: expect.not.stringMatching(/^0\.1\.0$/) });
  });

  it('health, a subagent written while the trigger was off, repair (health.md), and the alerts say so', async () => {
    expect((await sc(fresh, 'health')).code).toBe(0);
    await fresh.query('ALTER TABLE task_session_messages DISABLE TRIGGER subagent_context_capture');
    const t = await createTurn(fresh.pool, 'public', 'walk-missed');
    await insertMessage(fresh.pool, 'public', {
      id: 'msg-walk-missed', session: t.session, task: t.task, turn: t.turn, created_at: new Date().toISOString().replace('T', ' ').replace('Z', ''),
      metadata: subagentMetadata({ tool_call_id: 'toolu_walk_missed', status: 'completed', subagent: { subagent_type: 'Explore' } }),
    });
    await fresh.query('ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture');
    const short = await sc(fresh, 'health', '--json');
    expect(short.code).toBe(1);
    expect(JSON.parse(short.stdout)).toMatchObject({ status: 'shortfall', shortfall: 1 });
    // The newest subagent message is now newer than the newest row too: capture looks stalled as well.
    if (promtool) expect(firing((await sc(fresh, 'metrics', '--once')).stdout)).toContain('SubagentContextShortfall');
    const repair = await sc(fresh, 'repair');
    expect(repair.stdout).toBe('compared 1 subagent message, stored 1 missing row; shortfall now 0, nothing left to compare\n');
    const healthy = await sc(fresh, 'health', '--json');
    expect(healthy.code).toBe(0);
    expect(JSON.parse(healthy.stdout)).toMatchObject({ status: 'healthy', shortfall: 0 });
  });

  it.skipIf(!promtool)('metrics, judged by the shipped alert rules: a healthy installation fires none', async () => {
    const metrics = await sc(fresh, 'metrics', '--once');
    expect(metrics.code, metrics.stderr).toBe(0);
    expect(metrics.stdout).toContain('subagent_context_status{schema="public",status="healthy"} 1');
    expect(firing(metrics.stdout)).toEqual([]);
  });

  it('report', async () => {
    const report = await sc(fresh, 'report');
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toMatch(/^subagent-context report: database \S+\s+on\s+\S+,\s+schema public$/m);
  });

  const notInstalled = async () => {
    const h = await sc(fresh, 'health', '--json');
    expect(h.code).toBe(2);
    expect(JSON.parse(h.stdout).status).toBe('not_installed');
  };

  it('uninstall by the CLI (uninstall.md)', async () => {
    const byCli = await sc(fresh, 'uninstall');
    expect(byCli.code, byCli.stderr).toBe(0);
    expect(byCli.stdout).toMatch(/^removed: the trigger subagent_context_capture, /);
    await notInstalled();
  });

  // A database that answers with nothing installed is `up 1` with status not_installed (docs/dashboards.md),
  // so Prometheus fires TriggerMissing, not DatabaseUnreachable or MetricsAbsent.
  (promtool ? it : it.skip)('after uninstall, the shipped rules fire SubagentContextTriggerMissing', async () => {
    expect(firing((await sc(fresh, 'metrics', '--once')).stdout)).toEqual(['SubagentContextTriggerMissing']);
  });

  it('uninstall by plain node-pg-migrate, then by psql, reinstalling in between (uninstall.md)', async () => {
    expect((await sc(fresh, 'up')).code).toBe(0);
    const [down, printed] = blocksUnder('uninstall.md', 'With plain node-pg-migrate');
    const byMigrate = await runShell(down!.text.replace('postgres://USER@HOST/kandev', fresh.url)
      .replace('-m node_modules/subagent-context/migrations', '-m migrations'), clone, {}, { merged: true });
    expect(byMigrate.code, byMigrate.stdout).toBe(0);
    expect(byMigrate.stdout).toBe(printed!.text);
    await notInstalled();

    expect((await sc(fresh, 'up')).code).toBe(0);
    const [psql] = blocksUnder('uninstall.md', 'By hand, with psql');
    const byHand = await runShell(psql!.text.replace('P=node_modules/subagent-context', 'P=.'), clone, { DATABASE_URL: fresh.url });
    expect(byHand.code, byHand.stderr).toBe(0);
    expect(byHand.stdout + byHand.stderr).toBe('');
    await notInstalled();
    expect((await sc(fresh, 'uninstall')).stdout).toBe('nothing to uninstall: subagent-context is not installed in schema "public"\n');
  });
});
