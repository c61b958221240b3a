// 0.5.0: brings an earlier installation to this release (a no-op on a fresh install of it). In the
// database: every function and type named subagent_context_* (derive_subagent_row, capture_subagent_message,
// subagent_row and the subagent_* functions renamed; the trigger re-pointed, its ENABLE state kept); the
// rule for what is ours, subagent_context_ours(), in the data layer; the failure log counts a call's
// repeated failures in one row (occurrences, last_occurred_at) and says why one stays (stays_because).
// What 0.5.0 leaves in the database, with real DDL: schema-record/0.5.0.txt; what it changed: `diff schema-record/0.4.0.txt schema-record/0.5.0.txt`.
export { upgrade as up, nothing as down } from './lib/steps.js';
