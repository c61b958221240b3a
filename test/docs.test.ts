// What the docs tell a newcomer to run, run as written: applying kandev's fixture by hand
// (docs/demo.md), and the size of the suite that docs/compatibility.md reports.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshDatabase } from './helpers/database.js';
import { builtCli, runCli } from './helpers/cli.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import config from '../vitest.config.js';

const read = (doc: string) => readFileSync(join(PACKAGE_ROOT, 'docs', doc), 'utf8');
const scratch = await freshDatabase('docs_fixture'); // empty: no host tables
const psql = ['/usr/bin/psql', '/usr/local/bin/psql'].find(existsSync);

describe('docs/demo.md: kandev\'s tables by hand', () => {
  it.skipIf(!psql)('the sed | psql line creates the tables, and up installs on them', async () => {
    const line = /^(sed 's\/@extschema@\/public\/g' kandev\/schema\/\S+ \| psql "\$DATABASE_URL" [^\n]*)$/m.exec(read('demo.md'))?.[1];
    expect(line, 'docs/demo.md shows the fixture command').toBeDefined();
    const r = await new Promise<{ code: number; out: string }>((resolve) => execFile('bash', ['-euo', 'pipefail', '-c', line!],
      { cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: scratch.url } },
      (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: stdout + stderr })));
    expect(r.code, r.out).toBe(0);
    expect(r.out, 'psql -q prints nothing on success').toBe('');
    const tables = await scratch.query<{ t: string }>(
      `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`);
    expect(tables.rows.map((x) => x.t)).toEqual(['kandev_meta', 'task_session_messages', 'task_session_turns', 'task_sessions', 'tasks']);
    const cli = builtCli();
    const up = await runCli(cli, ['up'], { DATABASE_URL: scratch.url });
    expect(up.code, up.stderr).toBe(0);
    const health = await runCli(cli, ['health', '--json'], { DATABASE_URL: scratch.url });
    expect(health.code, health.stderr).toBe(0);
    expect(JSON.parse(health.stdout)).toMatchObject({ status: 'idle', activated: true });
  });
});

describe('docs/compatibility.md', () => {
  it('reports as many test files as vitest runs (every file once, the host-facing ones again on kandev 0.91)', () => {
    const testFiles = (dir: string) => readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.test.ts'));
    const projects = (config.test?.projects ?? []) as Array<{ test: { name: string; include: string[] } }>;
    expect(projects.find((p) => p.test.name === 'kandev-0.91')!.test.include).toEqual(['test/host/**/*.test.ts']);
    const hostFacing = testFiles('test/host');
    expect(hostFacing.length).toBeGreaterThan(0);
    const runs = testFiles('test').length + hostFacing.length;
    const reported = [...read('compatibility.md').matchAll(/\| (\d+) files, (\d+) tests\b/g)];
    expect(reported.length, 'the results table has rows').toBeGreaterThan(0);
    for (const [row, files] of reported) expect(Number(files), row).toBe(runs);
  });
});

describe('README.md: the Layout section', () => {
  const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
  const layout = readme.slice(readme.indexOf('## Layout'));
  const bullets = [...layout.matchAll(/^- `([\w.-]+)\/`([\s\S]*?)(?=^- |$(?![\s\S]))/gm)].map((m) => ({ dir: m[1]!, text: m[2]! }));
  const filesUnder = (dir: string) => readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: 'utf8' });

  it('names every top-level folder of the tree', () => {
    const tracked = readdirSync(PACKAGE_ROOT, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'dist'].includes(e.name))
      .map((e) => e.name);
    expect(bullets.map((b) => b.dir).sort()).toEqual(expect.arrayContaining(tracked.sort()));
  });

  it('names only files and folders that exist where it says', () => {
    const named = bullets.flatMap(({ dir, text }) => [...text.matchAll(/`([\w./-]+\.(?:ts|js|sql)|[\w-]+\/)`/g)]
      .map((m) => ({ dir, name: m[1]!.replace(/\/$/, '') })));
    expect(named.length).toBeGreaterThan(20);
    for (const { dir, name } of named) {
      const there = existsSync(join(PACKAGE_ROOT, name)) || filesUnder(dir).some((f) => f === name || f.endsWith(`/${name}`));
      expect(there, `${dir}/ … ${name}`).toBe(true);
    }
  });
});
