// Questions the tests ask the catalog about an installation, each answered in one place.
import type pg from 'pg';
import type { Queryable } from '../../kandev/host.js';
import { quoteIdent } from '#sql';
import { installationShape } from './shape.js';

/** The capture trigger's name on task_session_messages. */
export const CAPTURE_TRIGGER = 'subagent_context_capture';

/**
 * The capture trigger on `schema`.task_session_messages: its pg_trigger.tgenabled ('O' enabled, 'A'
 * ENABLE ALWAYS, 'R' ENABLE REPLICA, 'D' disabled), or null when it is not installed.
 */
export async function captureTrigger(q: Queryable, schema = 'public'): Promise<'O' | 'A' | 'R' | 'D' | null> {
  const { rows } = await q.query(
    `SELECT tgenabled FROM pg_trigger
      WHERE tgrelid = to_regclass(format('%I.task_session_messages', $1::text)) AND tgname = $2`, [schema, CAPTURE_TRIGGER]);
  return rows.length === 0 ? null : rows[0].tgenabled;
}

/**
 * Everything in `schema` a command could write: the installation's catalog (installationShape), every
 * row of every table and every sequence's position. What "nothing was written" compares, before and after.
 */
export async function schemaContents(pool: pg.Pool, schema: string): Promise<Record<string, unknown>> {
  const { rows: relations } = await pool.query(
    `SELECT c.relname, c.relkind FROM pg_class AS c
      WHERE c.relnamespace = $1::text::regnamespace AND c.relkind IN ('r', 'p', 'S') ORDER BY c.relname`, [schema]);
  const contents: Record<string, unknown> = { catalog: await installationShape(pool, schema) };
  for (const { relname, relkind } of relations) {
    const name = `${quoteIdent(schema)}.${quoteIdent(relname)}`;
    contents[relname] = (await pool.query(relkind === 'S'
      ? `SELECT last_value::text, is_called FROM ${name}`
      : `SELECT coalesce(json_agg(x ORDER BY x::text), '[]') AS rows FROM ${name} AS x`)).rows[0];
  }
  return contents;
}
