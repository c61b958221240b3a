// Who may write the installation: `up` and `uninstall` create, replace and drop what its owner owns (and a
// trigger and an index on kandev's messages table, which only that table's owner may), so another role is
// refused up front, in one sentence naming the role to use, before anything is changed. Left to the
// statements, such a role got node-pg-migrate's raw stack ("Unable to ensure migrations table: error: must
// be owner of table subagent_context_migrations"), or had the activation keys removed before the first
// statement it was refused (docs/security.md, roles).
import type pg from 'pg';
import { SQL } from 'sql-template-strings';
import { MIGRATIONS_TABLE } from './paths.js';
import { UserError } from './errors.js';

const WHY: Record<'up' | 'uninstall', string> = {
  up: 'it creates and replaces the installation\'s tables, functions and trigger',
  uninstall: 'it drops the installation\'s trigger, functions and counters',
};

/**
 * Refuses `command` unless the connecting role owns (or is a member of the role that owns) the
 * installation's bookkeeping table, or, for `up` before any installation, kandev's task_session_messages
 * (`uninstall` with nothing recorded goes on: it may have nothing to do).
 */
export async function assertInstaller(client: pg.ClientBase, schema: string, command: 'up' | 'uninstall'): Promise<void> {
  const { rows } = await client.query(SQL`
    SELECT c.relname, pg_get_userbyid(c.relowner) AS owner, current_user AS role,
           pg_has_role(current_user, c.relowner, 'USAGE') AS owns
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = ${schema} AND c.relname IN (${MIGRATIONS_TABLE}, ${command === 'up' ? 'task_session_messages' : MIGRATIONS_TABLE})
     ORDER BY c.relname = ${MIGRATIONS_TABLE} DESC
     LIMIT 1`);
  const first = rows[0] as { relname: string; owner: string; role: string; owns: boolean } | undefined;
  if (!first || first.owns) return;
  const what = first.relname === MIGRATIONS_TABLE ? 'the installation' : 'kandev\'s task_session_messages';
  throw new UserError(`the role ${first.role} does not own ${what} in schema "${schema}" (${first.relname} belongs to ` +
    `${first.owner}): run \`subagent-context ${command}\` as ${first.owner} or a role that is a member of it, because ` +
    `${WHY[command]}; no GRANT to another role replaces that (docs/security.md).`);
}
