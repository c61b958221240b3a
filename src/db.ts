// Connections, and the errors an operator can act on.
import pg from 'pg';
import { SQL } from 'sql-template-strings';

export type Client = pg.Client;

/** The exit status of every error, on every command (docs/health.md, exit status): "could not check", never 0, 1 or 2. */
export const ERROR_EXIT = 3;

/** An error an operator can act on: its message is one sentence that says what to do. */
export class UserError extends Error {
  readonly exitCode = ERROR_EXIT;
}

/** The user name in a connection URL, for a GRANT the operator can paste. */
function roleOf(url: string | undefined): string {
  try {
    return url ? decodeURIComponent(new URL(url).username) || 'the connecting role' : 'the connecting role';
  } catch {
    return 'the connecting role';
  }
}

/** A name as SQL spells it: bare when it is a plain lowercase identifier, else double-quoted. */
function sqlName(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`;
}

/** A pg error, or a connection error, as one sentence that says what to do. */
export function explain(err: unknown, url?: string, schema?: string): Error {
  if (err instanceof UserError) return err;
  const e = err as { code?: string; message?: string };
  const where = url ? ` (${redact(url)})` : '';
  const message = String(e.message ?? err);
  const role = roleOf(url);
  // node-pg-migrate wraps the errors of its bookkeeping in plain Errors (no SQLSTATE): read the text.
  const schemaDenied = /permission denied for schema ("[^"]+"|\S+)/.exec(message);
  if (schemaDenied) {
    return new UserError(`the role ${role} may not create objects in schema ${schemaDenied[1]}: run this as the schema's owner, ` +
      `or grant it with \`GRANT CREATE ON SCHEMA ${schemaDenied[1]} TO ${role};\`.`);
  }
  if (/relation "subagent_context_migrations" already exists/.test(message)) {
    return new UserError(`the role ${role} cannot read subagent_context_migrations, the installation's bookkeeping table, ` +
      `which another role created: run this as the role that installed subagent-context (the table's owner).`);
  }
  if (/^Another migration is already running/.test(message)) {
    return new UserError('another `subagent-context up` (or node-pg-migrate) is installing into this database right now: ' +
      'wait for it to finish, then run this again.');
  }
  if (/client password must be a string/.test(message)) {
    return new UserError(`the server asks for a password and none was given${where}: put it in the URL ` +
      '(postgres://user:password@host:5432/database) or set PGPASSWORD.');
  }
  switch (e.code) {
    case '42501': {
      const table = /permission denied for (?:table|relation|view|sequence|function) (\S+)/.exec(message)?.[1];
      // PostgreSQL names the table without its schema; the GRANT must name it, or it misses on --schema.
      const q = (name: string) => (schema ? `${sqlName(schema)}.${name}` : name);
      return new UserError(table
        ? `the role ${role} may not read ${q(table)}: grant it with \`GRANT SELECT ON ${q(table)} TO ${role};\` ` +
          `(reading reports needs SELECT on ${q('task_session_subagents')}, ${q('task_sessions')} and ${q('tasks')}), or connect as its owner.`
        : `${message}: the role ${role} lacks a privilege this needs; connect as the role that installed subagent-context.`);
    }
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'ETIMEDOUT':
    case 'EAI_AGAIN':
    case 'ECONNRESET':
      return new UserError(`cannot reach the database${where}: ${e.message}. Check --database-url / DATABASE_URL and that the server is running.`);
    case '28P01':
    case '28000':
      return new UserError(`the database refused the login${where}: ${e.message}. Check the user and password in --database-url.`);
    case '3D000':
      return new UserError(`${e.message}${where}. Create the database or fix the name in --database-url.`);
    case '3F000':
      return new UserError(`${e.message}. Create the schema or pass the schema that holds kandev's tables with --schema.`);
    case '42883':
    case '42P01':
      return new UserError(`${e.message}: subagent-context does not look installed in this schema. Run \`subagent-context up\` first.`);
    default:
      return err instanceof Error ? err : new Error(String(err));
  }
}

export function redact(url: string): string {
  return url.replace(/(\/\/[^:/@]+):[^@]*@/, '$1:***@');
}

/** Refuses what is not a postgres:// URL before pg reads it (it would look "not-a-url" up as a host name). */
export function checkUrl(url: string): void {
  let parsed: URL | undefined;
  try { parsed = new URL(url); } catch { /* reported below */ }
  if (!parsed || !['postgres:', 'postgresql:'].includes(parsed.protocol)) {
    throw new UserError(`--database-url / DATABASE_URL must be a URL like postgres://user:password@host:5432/database, got "${redact(url)}".`);
  }
}

export async function connect(url: string | undefined): Promise<pg.Client> {
  if (!url) {
    throw new UserError('no database given: pass --database-url URL or set DATABASE_URL.');
  }
  checkUrl(url);
  const client = new pg.Client({ connectionString: url, application_name: 'subagent-context' });
  client.on('error', () => {}); // a dropped connection surfaces on the next query instead
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => {});
    throw explain(err, url);
  }
  client.on('notice', () => {});
  return client;
}

/** `schema`, when given, qualifies the table names of a privilege error's GRANT hint. */
export async function withClient<T>(url: string | undefined, fn: (client: pg.Client) => Promise<T>, schema?: string): Promise<T> {
  const client = await connect(url);
  try {
    return await fn(client);
  } catch (err) {
    throw explain(err, url, schema);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function assertSchemaExists(client: pg.Client, schema: string): Promise<void> {
  if (/["']/.test(schema)) {
    // node-pg-migrate, which installs, writes the schema name into SQL without escaping quotes.
    throw new UserError(`schema names with a quote character are not supported, got ${JSON.stringify(schema)}: ` +
      'use a schema whose name has no \' or ".');
  }
  const { rows } = await client.query(SQL`SELECT 1 FROM pg_namespace WHERE nspname = ${schema}`);
  if (rows.length === 0) {
    throw new UserError(`schema "${schema}" not found. Pass the schema that holds kandev's tables with --schema.`);
  }
}

/**
 * Whether the capture trigger is on the schema's task_session_messages, read from the catalog: for an
 * installation that may be half there or half removed. Installed code asks
 * subagent_context_trigger_state() (sql/capture.sql) instead.
 */
export async function captureTriggerExists(client: pg.ClientBase, schema: string): Promise<boolean> {
  const { rows } = await client.query(
    SQL`SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(format('%I.task_session_messages', ${schema}::text))
        AND tgname = 'subagent_context_capture'`);
  return rows.length > 0;
}
