// Activation: health's index on task_session_messages (built CONCURRENTLY), then the guarded backfill
// of history and the two activation keys.
// Runs outside the install transaction: node-pg-migrate commits the installed trigger first, so message
// writers are blocked only by the short install, never by a long backfill, and a failing backfill
// (reported as a WARNING, retried by `subagent-context up` or `backfill`) cannot undo the trigger.
//
// `subagent-context up` sets subagent_context.backfill_by = 'cli' in its session and runs the backfill
// itself right after the migrations, so it can report the rows it stored and show progress; plain
// node-pg-migrate never sets it and gets the backfill here.
import { targetSchema, quoteIdent, sqlStatements } from './lib/sql.js';

export async function up(pgm) {
  const schema = await targetSchema(pgm);
  pgm.noTransaction();
  for (const statement of sqlStatements('message-index.sql', schema)) pgm.sql(statement);
  pgm.sql(`DO $activate$
BEGIN
  IF current_setting('subagent_context.backfill_by', true) IS DISTINCT FROM 'cli' THEN
    PERFORM ${quoteIdent(schema)}.subagent_context_backfill();
  END IF;
END
$activate$`);
}

export async function down(pgm) {
  const schema = await targetSchema(pgm);
  pgm.sql(`DELETE FROM ${quoteIdent(schema)}.kandev_meta
            WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through')`);
}
