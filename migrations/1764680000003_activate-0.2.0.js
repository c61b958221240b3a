// 0.2.0: rebuilds health's index on task_session_messages if an earlier release built it differently.
// Going down removes the activation keys, as the first activation's down does: one `down` deactivates.
// What 0.2.0 leaves in the database, with real DDL: schema-record/0.2.0.txt; what it changed: `diff schema-record/0.1.0.txt schema-record/0.2.0.txt`.
export { activate as up, deactivate as down } from './lib/steps.js';
