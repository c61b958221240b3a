// 0.3.0: rebuilds health's index on task_session_messages for the one-pass prefilter, without blocking
// writers. Going down removes the activation keys, as every activation's down does.
// What 0.3.0 leaves in the database, with real DDL: schema-record/0.3.0.txt; what it changed: `diff schema-record/0.2.0.txt schema-record/0.3.0.txt`.
export { activate as up, deactivate as down } from './lib/steps.js';
