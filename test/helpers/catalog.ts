// Questions the tests ask the catalog about an installation, each answered in one place.
import type { Queryable } from '../../kandev/host.js';

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
