// 0.1.0: health's index on task_session_messages, then the guarded backfill and the activation keys.
// What it leaves in the database, with real DDL: schema-record/0.1.0.txt.
export { activate as up, deactivate as down } from './lib/steps.js';
