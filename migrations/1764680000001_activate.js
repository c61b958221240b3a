// Activation: the guarded backfill of history and the two activation keys.
// Runs outside the install transaction: node-pg-migrate commits the installed trigger first, so message
// writers are blocked only by the short install, never by a long backfill, and a failing backfill
// (reported as a WARNING, retried by `subagent-context up` or `backfill`) cannot undo the trigger.
import { targetSchema, quoteIdent } from './lib/sql.js';

export async function up(pgm) {
  const schema = await targetSchema(pgm);
  pgm.noTransaction();
  pgm.sql(`SELECT status FROM ${quoteIdent(schema)}.subagent_context_backfill()`);
}

export async function down(pgm) {
  const schema = await targetSchema(pgm);
  pgm.sql(`DELETE FROM ${quoteIdent(schema)}.kandev_meta
            WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through')`);
}
