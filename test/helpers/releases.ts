// Earlier releases, installed as the field has them: their own migrations and SQL, taken from git at the
// release's commit (a tag may not travel with a clone, so the commit is named). Every release adds itself.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { runner } from 'node-pg-migrate';
import { MIGRATIONS_TABLE, PACKAGE_ROOT } from '../../src/paths.js';

export interface Release { version: string; commit: string }

export const RELEASES: Release[] = [
  { version: '0.1.0', commit: '8ee25cd' },
  { version: '0.2.0', commit: 'ba62a39' },
  { version: '0.3.0', commit: '8c1724b' },
  { version: '0.4.0', commit: '4259581' },
];

/**
 * Installs `release` into `schema` with its own migrations (what `subagent-context up` of that release
 * ran: the migrations, whose activation step backfills). Returns the names of the migrations it applied.
 */
export async function installRelease(release: Release, url: string, schema: string): Promise<string[]> {
  // Inside the package's node_modules, so that the release's migrations resolve its dependencies
  // (0.4.0's steps.js imports node-pg-migrate) from the packages installed here.
  const parent = join(PACKAGE_ROOT, 'node_modules', '.releases');
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, `${release.version}-`));
  try {
    const archive = execFileSync('git', ['-C', PACKAGE_ROOT, 'archive', release.commit, 'migrations', 'sql', 'package.json']);
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
    const client = new pg.Client(url);
    await client.connect();
    try {
      const applied = await runner({
        dbClient: client, dir: join(dir, 'migrations'), direction: 'up', schema, migrationsTable: MIGRATIONS_TABLE,
        checkOrder: true, logger: { debug() {}, info() {}, warn() {}, error() {} },
      });
      return applied.map((m) => m.name);
    } finally {
      await client.end();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
