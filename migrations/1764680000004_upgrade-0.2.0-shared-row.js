// 0.2.0, after its first pair: the code layer again, for a database that already ran that pair (the
// upserts now take the derived row whole). A no-op where the installed code is already this package's.
// Going down removes the activation keys, as every activation's down does: one `down` deactivates.
// What 0.2.0 leaves in the database, with real DDL: schema-record/0.2.0.txt; what it changed: `diff schema-record/0.1.0.txt schema-record/0.2.0.txt`.
export { upgrade as up, deactivate as down } from './lib/steps.js';
