// The package's migrations by name, in order: what a fresh install applies.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS_DIR, PACKAGE_ROOT } from '../../src/paths.js';

export const MIGRATIONS = readdirSync(MIGRATIONS_DIR).filter((f) => /^\d+_.*\.js$/.test(f)).map((f) => f.replace(/\.js$/, '')).sort();

/**
 * node-pg-migrate's own command, run with `node` directly: the program `npx node-pg-migrate` starts,
 * without npx's half-second of start-up (install/package.test.ts runs the documented npx line itself).
 */
export const NODE_PG_MIGRATE = join(PACKAGE_ROOT, 'node_modules', 'node-pg-migrate', 'bin', 'node-pg-migrate.js');
