// 0.1.0: health's index on task_session_messages, then the guarded backfill and the activation keys.
export { activate as up, deactivate as down } from './lib/steps.js';
