// Where the package's own files are, whether running from src/ (tests) or dist/src/ (installed).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === 'subagent-context') return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('subagent-context: cannot find the package root');
    dir = parent;
  }
}

export const PACKAGE_ROOT = findPackageRoot();
export const MIGRATIONS_DIR = join(PACKAGE_ROOT, 'migrations');
export const MIGRATIONS_TABLE = 'subagent_context_migrations';
