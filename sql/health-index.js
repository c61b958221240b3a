// Health's index on task_session_messages, as the activation builds it outside any transaction: the
// statements of indexes/message-index.sql on a plain table, or of indexes/message-index-partitioned.sql, planned from the
// catalog, when kandev partitions the table.
import { MANIFEST, sqlStatements } from './loader.js';

/** @typedef {import('./loader.js').Select} Select */

/**
 * Is the schema's task_session_messages a partitioned table?
 * @param {Select} select @param {string} schema @returns {Promise<boolean>}
 */
export async function messagesPartitioned(select, schema) {
  const rows = await select(
    `SELECT c.relkind = 'p' AS partitioned FROM pg_class AS c
      WHERE c.oid = to_regclass(format('%I.task_session_messages', $1::text))`, [schema]);
  return rows.length > 0 && rows[0].partitioned;
}

/**
 * The statements that build (or rebuild) health's index, in order, each to run alone outside a
 * transaction. `select(text, values)` reads the catalog now (node-pg-migrate's pgm.db.select, or a pg
 * client wrapped): on a partitioned table, indexes/message-index-partitioned.sql's second statement is a query
 * whose rows are the per-partition builds that go between its first and third.
 * @param {Select} select @param {string} schema @returns {Promise<string[]>}
 */
export async function healthIndexStatements(select, schema) {
  if (!(await messagesPartitioned(select, schema))) return MANIFEST.index.flatMap((f) => sqlStatements(f, schema));
  const steps = MANIFEST['index-partitioned'].flatMap((f) => sqlStatements(f, schema));
  if (steps.length !== 4) throw new Error('subagent-context: indexes/message-index-partitioned.sql must have 4 statements');
  const [prepare, plan, attach, finish] = /** @type {[string, string, string, string]} */ (steps);
  const builds = await select(plan, []);
  return [prepare, ...builds.map((b) => b.statement), attach, finish];
}
