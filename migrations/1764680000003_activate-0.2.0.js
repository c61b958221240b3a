// 0.2.0: rebuilds health's index on task_session_messages if an earlier release built it differently.
// Going down removes the activation keys, as the first activation's down does: one `down` deactivates.
export { activate as up, deactivate as down } from './lib/steps.js';
