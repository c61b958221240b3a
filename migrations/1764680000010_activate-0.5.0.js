// 0.5.0: rebuilds health's index on task_session_messages when its predicate changed, without blocking
// writers, then the guarded backfill. Going down removes the activation keys, as every activation's down does.
export { activate as up, deactivate as down } from './lib/steps.js';
