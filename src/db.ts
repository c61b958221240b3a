// Connections, and the errors an operator can act on.
import pg from 'pg';
import { SQL } from 'sql-template-strings';

export type Client = pg.Client;

export class UserError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

/** A pg error, or a connection error, as one sentence that says what to do. */
export function explain(err: unknown, url?: string): Error {
  if (err instanceof UserError) return err;
  const e = err as { code?: string; message?: string };
  const where = url ? ` (${redact(url)})` : '';
  switch (e.code) {
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'ETIMEDOUT':
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

export async function connect(url: string | undefined): Promise<pg.Client> {
  if (!url) {
    throw new UserError('no database given: pass --database-url URL or set DATABASE_URL.');
  }
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

export async function withClient<T>(url: string | undefined, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connect(url);
  try {
    return await fn(client);
  } catch (err) {
    throw explain(err, url);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function assertSchemaExists(client: pg.Client, schema: string, exitCode = 1): Promise<void> {
  const { rows } = await client.query(SQL`SELECT 1 FROM pg_namespace WHERE nspname = ${schema}`);
  if (rows.length === 0) {
    throw new UserError(`schema "${schema}" not found. Pass the schema that holds kandev's tables with --schema.`, exitCode);
  }
}
