// 0.1.0: installs capture (data and code layers; see lib/steps.js).
// What it leaves in the database, with real DDL: schema-record/0.1.0.txt.
export { install as up, uninstall as down } from './lib/steps.js';
