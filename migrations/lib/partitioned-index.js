// Health's index when kandev partitions task_session_messages (sql/message-index-partitioned.sql):
// the same definition as on a plain table (sql/message-index.sql), built partition by partition.
import { readFileSync } from 'node:fs';
import { sqlStatements } from './sql.js';

const SQL_DIR = new URL('../../sql/', import.meta.url);

/** Is the schema's task_session_messages a partitioned table? */
export async function messagesPartitioned(select, schema) {
  const rows = await select(
    `SELECT c.relkind = 'p' AS partitioned FROM pg_class AS c
      WHERE c.oid = to_regclass(format('%I.task_session_messages', $1::text))`, [schema]);
  return rows.length > 0 && rows[0].partitioned;
}

/**
 * The plain table's index, as message-index.sql writes it: what follows `ON <schema>.task_session_messages`
 * in its CREATE INDEX statement (columns and predicate), and the comment that names that definition.
 */
export function plainIndexDefinition() {
  const text = readFileSync(new URL('message-index.sql', SQL_DIR), 'utf8');
  const create = /CREATE INDEX CONCURRENTLY IF NOT EXISTS subagent_context_recent_messages_idx\s+ON @extschema@\.task_session_messages\s+([^;]+);/.exec(text);
  const comment = /COMMENT ON INDEX @extschema@\.subagent_context_recent_messages_idx IS '([^']*)'/.exec(text);
  if (!create || !comment) {
    throw new Error('subagent-context: message-index.sql has no CREATE INDEX or COMMENT of subagent_context_recent_messages_idx');
  }
  return { definition: create[1].trim(), comment: comment[1] };
}

/**
 * Queues the partitioned build on `pgm` (a migration that ran pgm.noTransaction()): step 1, the
 * statements step 2 plans from the catalog now, then steps 3 and 4.
 */
export async function queuePartitionedIndex(pgm, schema) {
  const { definition, comment } = plainIndexDefinition();
  const steps = sqlStatements('message-index-partitioned.sql', schema)
    .map((s) => s.replaceAll('@index_definition@', definition).replaceAll('@index_comment@', comment.replaceAll("'", "''")));
  if (steps.length !== 4) throw new Error('subagent-context: message-index-partitioned.sql must have 4 statements');
  const [prepare, plan, attach, finish] = steps;
  const builds = await pgm.db.select(plan, [definition, comment]);
  pgm.sql(prepare);
  for (const { statement } of builds) pgm.sql(statement);
  pgm.sql(attach);
  pgm.sql(finish);
}
