// A key's stored row beside the row its messages derive as they are now (HISTORY_ROWS), for the tests of
// repair and replay that check no row is left staler than its message.
import { quoteIdent } from '#sql';
import { HISTORY_ROWS } from '../../kandev/subagent-row.js';
import { ROW_COLUMNS, selectList } from '../model/subagent-table.js';
import type { TestDatabase } from './database.js';

const DERIVED = selectList(ROW_COLUMNS.filter((c) => c !== 'agent_execution_id' && c !== 'source'));

export async function storedAndDerived(db: TestDatabase, schema: string, call: string) {
  const c = await db.connect();
  try {
    await c.query(`SET search_path = ${quoteIdent(schema)}`);
    const stored = (await c.query(`SELECT ${DERIVED} FROM task_session_subagents WHERE tool_call_id = $1`, [call])).rows;
    const derived = (await c.query(`SELECT ${DERIVED} FROM ${HISTORY_ROWS} AS h WHERE h.tool_call_id = $1`, [call])).rows;
    return { stored, derived };
  } finally {
    await c.end();
  }
}
