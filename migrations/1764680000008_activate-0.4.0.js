// 0.4.0: rebuilds health's index on task_session_messages when its predicate changed, without blocking
// writers, then the guarded backfill. Going down removes the activation keys, as every activation's down does.
// What 0.4.0 leaves in the database, with real DDL: schema-record/0.4.0.txt; what it changed: `diff schema-record/0.3.0.txt schema-record/0.4.0.txt`.
export { activate as up, deactivate as down } from './lib/steps.js';
