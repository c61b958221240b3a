// What every test file would otherwise repeat, done once per run by the global setup (postgres.ts):
//   - the CLI, compiled once into dist/.test-cli/ (test/helpers/cli.ts runs it);
//   - template databases that test files clone (test/helpers/database.ts, CREATE DATABASE … TEMPLATE):
//     `host`, kandev's host tables in public; `installed`, the same with `subagent-context up` run.
// Templates are prepared through the same functions a test calls (createHostTables, up), never from
// copied SQL, so they install exactly what a file installing for itself would.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { createHostTables, HOST_SHAPES, type HostShape } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { urlFor } from '../../demo/embedded.js';

/** What a test file may start from: an empty database, or a clone of one of the templates. */
export type Template = 'host' | 'installed';
/** Template names by host shape (kandev/host.ts HOST_SHAPES), then by kind. */
export type Templates = Record<HostShape, Record<Template, string>>;

const CLI_DIR = join(PACKAGE_ROOT, 'dist', '.test-cli');
/** The sources the built CLI is made of (the demo command imports demo/, which imports kandev/). */
const SOURCES = ['src', 'kandev', 'demo'].map((d) => join(PACKAGE_ROOT, d));

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Compiles the CLI into dist/.test-cli/ unless that build is newer than every source; returns the
 * path of its cli.js. Its own directory, so an engineer's `npm run build` never replaces it mid-run.
 */
export async function buildCli(): Promise<string> {
  const cli = join(CLI_DIR, 'src', 'cli.js');
  const newest = Math.max(...SOURCES.map(newestSource), statSync(join(PACKAGE_ROOT, 'tsconfig.json')).mtimeMs);
  if (existsSync(cli) && statSync(cli).mtimeMs >= newest) return cli;
  rmSync(CLI_DIR, { recursive: true, force: true });
  const tsc = join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', join(PACKAGE_ROOT, 'tsconfig.json'), '--outDir', CLI_DIR],
      { cwd: PACKAGE_ROOT });
  } catch (err) {
    // tsc still emits on type errors elsewhere (npm run typecheck reports them); only a missing
    // cli.js stops the run.
    if (!existsSync(cli)) throw err;
  }
  return cli;
}

export { urlFor };

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client(url);
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

/** Creates the run's templates, named with the run's prefix (so the leftovers check covers them). */
export async function createTemplates(adminUrl: string, prefix: string): Promise<Templates> {
  // One pair per host shape: the kandev 0.91 project (vitest.config.ts) clones its own.
  const tag = (shape: HostShape) => (shape === 'minimal' ? '' : `${shape.replace(/\W/g, '')}_`);
  const templates = Object.fromEntries(HOST_SHAPES.map((shape) => [shape,
    { host: `${prefix}template_${tag(shape)}host`, installed: `${prefix}template_${tag(shape)}installed` }])) as Templates;
  const prepare = (shape: HostShape): Record<Template, (c: pg.Client) => Promise<unknown>> => ({
    host: (c) => createHostTables(c, 'public', { shape }),
    installed: async (c) => { await createHostTables(c, 'public', { shape }); await up(c, 'public'); },
  });
  const all = HOST_SHAPES.flatMap((shape) => (Object.keys(templates[shape]) as Template[]).map((kind) => [shape, kind] as const));
  try {
    await withClient(adminUrl, async (admin) => {
      for (const [shape, kind] of all) await admin.query(`CREATE DATABASE "${templates[shape][kind]}"`);
    });
    // Every connection to a template is closed when this returns: a template cannot be cloned while
    // anyone is connected to it.
    await Promise.all(all.map(([shape, kind]) => withClient(urlFor(adminUrl, templates[shape][kind]), prepare(shape)[kind])));
    return templates;
  } catch (err) {
    await dropTemplates(adminUrl, templates).catch(() => {});
    throw err;
  }
}

export async function dropTemplates(adminUrl: string, templates: Templates): Promise<void> {
  await withClient(adminUrl, async (admin) => {
    for (const name of Object.values(templates).flatMap((t) => Object.values(t))) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
}
