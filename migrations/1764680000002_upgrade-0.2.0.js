// 0.2.0: brings an earlier installation to this release (a no-op on a fresh install of it).
// What 0.2.0 leaves in the database, with real DDL: schema-record/0.2.0.txt; what it changed: `diff schema-record/0.1.0.txt schema-record/0.2.0.txt`.
export { upgrade as up, nothing as down } from './lib/steps.js';
