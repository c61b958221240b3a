// 0.3.0: rebuilds health's index on task_session_messages for the one-pass prefilter, without blocking
// writers. Going down removes the activation keys, as every activation's down does.
export { activate as up, deactivate as down } from './lib/steps.js';
