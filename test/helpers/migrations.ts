// The package's migrations by name, in order: what a fresh install applies.
import { readdirSync } from 'node:fs';
import { MIGRATIONS_DIR } from '../../src/paths.js';

export const MIGRATIONS = readdirSync(MIGRATIONS_DIR).filter((f) => /^\d+_.*\.js$/.test(f)).map((f) => f.replace(/\.js$/, '')).sort();
