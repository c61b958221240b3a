// 0.2.0, after its first pair: the code layer again, for a database that already ran that pair (the
// upserts now take the derived row whole). A no-op where the installed code is already this package's.
// Going down removes the activation keys, as every activation's down does: one `down` deactivates.
export { upgrade as up, deactivate as down } from './lib/steps.js';
