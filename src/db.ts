// Connections, and the errors an operator can act on.
import pg from 'pg';
import { SQL } from 'sql-template-strings';
import { inlineValues, quoteIdent, sqlFile, stringLiteral } from '#sql';
import { redactUrl } from './secrets.js';
import { UserError } from './errors.js';
import { connectClient, tlsSentence } from './tls.js';
import { credentialsToCheck } from './connection.js';

export type Client = pg.Client;


/** The user name in a connection URL, for a GRANT the operator can paste. */
function roleOf(url: string | undefined): string {
  try {
    return url ? decodeURIComponent(new URL(url).username) || CONNECTING_ROLE : CONNECTING_ROLE;
  } catch {
    return CONNECTING_ROLE;
  }
}
const CONNECTING_ROLE = 'the connecting role';

/** A name as SQL spells it: bare when it is a plain lowercase identifier, else double-quoted. */
function sqlName(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : quoteIdent(name);
}

/**
 * A missing privilege on one object. The message says what was refused; the command that got it says
 * what to grant (privilegeMessage), once: the object refused first is rarely the only one it needs.
 */
export class PrivilegeError extends UserError {
  constructor(readonly role: string, readonly object: string | null, message: string) {
    super(message);
  }
}

/**
 * What each command needs (docs/security.md, roles): for a reading role, USAGE on the schema and the
 * SELECT it names; for a command that writes the installation, the installing role. Health and metrics
 * need USAGE only: the functions they call return counts and timestamps as their owner.
 */
const PRIVILEGES: Record<string, { tables: string[] } | { installer: string }> = {
  health: { tables: [] },
  metrics: { tables: [] },
  report: { tables: ['task_session_subagents', 'task_sessions', 'tasks'] },
  repair: { installer: 'it writes the missing rows into task_session_subagents with the rights of the role that runs it' },
  backfill: { installer: 'it writes history into task_session_subagents and the activation keys into kandev_meta' },
  up: { installer: 'it creates and replaces the installation\'s tables, functions and trigger' },
  uninstall: { installer: 'it drops the installation\'s trigger, functions and counters, which only their owner may' },
};

/** A privilege error as one sentence naming everything `command` needs, so that one fix is enough. */
export function privilegeMessage(command: string, schema: string, err: PrivilegeError): string {
  const need = PRIVILEGES[command];
  if (!need || !err.object) return err.message;
  const q = (name: string) => (schema === 'public' ? name : `${sqlName(schema)}.${name}`);
  const grantee = err.role === CONNECTING_ROLE ? '<role>' : sqlName(err.role);
  if (err.object === SCHEMA && 'installer' in need) return err.message;
  if (err.object === SCHEMA && 'tables' in need) {
    const tables = need.tables.length ? ` and SELECT on ${need.tables.map(q).join(', ')}` : '';
    return `the role ${err.role} may not use schema ${sqlName(schema)}: \`subagent-context ${command}\` needs USAGE on it${tables}; ` +
      `grant it with \`GRANT USAGE ON SCHEMA ${sqlName(schema)} TO ${grantee};\`${tables ? ` and \`GRANT SELECT ON ${need.tables.map(q).join(', ')} TO ${grantee};\`` : ''} ` +
      '(docs/security.md#a-dashboard-role), or run it as the installing role.';
  }
  const refused = `the role ${err.role} may not use ${q(err.object)}`;
  if (err.object === 'subagent_context_reconcile' && 'tables' in need) {
    // health --full runs the complete reconciliation, step by step: the one function a reading role may be granted.
    const fn = `${sqlName(schema)}.subagent_context_reconcile(timestamp)`;
    return `${refused}: \`subagent-context ${command === 'health' ? 'health --full' : command}\` runs the reconciliation, so it ` +
      `needs EXECUTE on it; grant it with \`GRANT EXECUTE ON FUNCTION ${fn} TO ${grantee};\` (docs/security.md#a-dashboard-role), ` +
      'or run it as the installing role.';
  }
  if ('installer' in need) {
    return `${refused}: \`subagent-context ${command}\` must run as the role that installed subagent-context (the owner ` +
      `of ${q('task_session_subagents')}), because ${need.installer}; no GRANT to another role replaces that.`;
  }
  const tables = need.tables.map(q).join(', ');
  if (!tables) return err.message;
  return `${refused}: \`subagent-context ${command}\` needs SELECT on ${tables}; grant it with ` +
    `\`GRANT SELECT ON ${tables} TO ${grantee};\` (docs/security.md), or run it as the installing role.`;
}

/** What a PrivilegeError names when the schema itself was refused (no USAGE, or no CREATE for `up`). */
const SCHEMA = 'schema';

/**
 * The server ended the session mid-command (pg_terminate_backend, a restart, a shutdown), or the connection
 * dropped: `next` says what is kept and what to run (a command that knows what it commits says it better).
 */
export function sessionEndedSentence(reason: string,
  next = 'what had committed is kept and the statement running was rolled back: run the command again once the server accepts connections'): string {
  return `the database ended this session (${reason.replace(/\.$/, '')}: pg_terminate_backend, a restart or a shutdown); ${next}.`;
}

/** Whether `err` is the session being ended under a command (see sessionEndedSentence). */
export function isSessionEnded(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return ['57P01', '57P02', '57P03'].includes(e?.code ?? '') ||
    /^Connection terminated|is not queryable|terminating connection/.test(String(e?.message ?? ''));
}

/** A pg error, or a connection error, as one sentence that says what to do. */
/** `schema`, when given, qualifies the object a privilege error names. */
export function explain(err: unknown, url?: string, schema?: string): Error {
  if (err instanceof UserError) return err;
  const e = err as { code?: string; message?: string };
  const where = url ? ` (${redact(url)})` : '';
  const message = String(e.message ?? err);
  const role = roleOf(url);
  // node-pg-migrate wraps the errors of its bookkeeping in plain Errors (no SQLSTATE): read the text.
  const schemaDenied = /permission denied for schema ("[^"]+"|\S+)/.exec(message);
  if (schemaDenied) {
    // A command that installs is told what creating needs; a reading one (privilegeMessage) what reading needs.
    return new PrivilegeError(role, SCHEMA, `the role ${role} may not create objects in schema ${schemaDenied[1]}: run this as the ` +
      `schema's owner, or grant it with \`GRANT CREATE ON SCHEMA ${schemaDenied[1]} TO ${role};\`.`);
  }
  if (/relation "subagent_context_migrations" already exists/.test(message)) {
    return new UserError(`the role ${role} cannot read subagent_context_migrations, the installation's bookkeeping table, ` +
      `which another role created: run this as the role that installed subagent-context (the table's owner).`);
  }
  if (/^Another migration is already running/.test(message)) {
    return new UserError('another `subagent-context up` (or node-pg-migrate) is installing into this database right now: ' +
      'wait for it to finish, then run this again.');
  }
  const tls = tlsSentence(err, url, where);
  if (tls) return new UserError(tls);
  if (!e.code && /^Connection terminated unexpectedly|is not queryable/.test(message)) {
    return new UserError(sessionEndedSentence(message));
  }
  if (/client password must be a string/.test(message)) {
    return new UserError(`the server asks for a password and none was given${where}: put it in the URL ` +
      '(postgres://user:password@host:5432/database) or set PGPASSWORD.');
  }
  switch (e.code) {
    case '42501': {
      const object = /permission denied for (?:table|relation|view|sequence|function) (\S+)/.exec(message)?.[1] ?? null;
      return new PrivilegeError(role, object, object
        ? `the role ${role} may not use ${schema && schema !== 'public' ? `${sqlName(schema)}.${object}` : object}`
        : `${message}: the role ${role} lacks a privilege this needs; connect as the role that installed subagent-context.`);
    }
    case '25006':  // read_only_sql_transaction: a write on a standby or in a read-only transaction
      return new UserError(READ_ONLY_SENTENCE);
    case '57P01':  // admin_shutdown: pg_terminate_backend, or a fast shutdown
    case '57P02':  // crash_shutdown
    case '57P03':  // cannot_connect_now: the server is starting or stopping
      return new UserError(sessionEndedSentence(message));
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'ETIMEDOUT':
    case 'EAI_AGAIN':
    case 'ECONNRESET':
      return new UserError(`cannot reach the database${where}: ${e.message}. Check --database-url / DATABASE_URL and that the server is running.`);
    case '28P01':
    case '28000':
      return new UserError(`the database refused the login${where}: ${e.message}. Check ${credentialsToCheck()}.`);
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

/** A connection URL as it may be shown: no password, wherever it sits (src/secrets.ts). */
export function redact(url: string): string {
  return redactUrl(url);
}

/** Refuses what is not a postgres:// URL before pg reads it (it would look "not-a-url" up as a host name). */
export function checkUrl(url: string): void {
  let parsed: URL | undefined;
  try { parsed = new URL(url); } catch { /* reported below */ }
  if (!parsed || !['postgres:', 'postgresql:'].includes(parsed.protocol)) {
    throw new UserError(`--database-url / DATABASE_URL must be a URL like postgres://user:password@host:5432/database, got "${redact(url)}".`);
  }
}

/** When neither --database-url, DATABASE_URL nor a PG* variable names a database (src/connection.ts). */
export const NO_DATABASE_SENTENCE = 'no database given: pass --database-url URL, or set DATABASE_URL, or the PG* ' +
  'variables psql reads (PGHOST, PGDATABASE, PGUSER, or PGSERVICE for an entry of pg_service.conf).';

export async function connect(url: string | undefined): Promise<pg.Client> {
  if (!url) throw new UserError(NO_DATABASE_SENTENCE);
  checkUrl(url);
  let client: pg.Client;
  try {
    // A dropped connection surfaces on the next query instead of as an 'error' event.
    client = await connectClient(url, { application_name: 'subagent-context' });
  } catch (err) {
    throw explain(err, url);
  }
  const said: string[] = [];
  notices.set(client, said);
  // What the installation's SQL tells the operator (RAISE NOTICE/WARNING 'subagent-context: …'), kept for
  // the command to print (takeNotices); anything else the server says is not for the operator.
  client.on('notice', (n) => { if (n.message?.startsWith(NOTICE_PREFIX)) said.push(n.message.slice(NOTICE_PREFIX.length)); });
  return client;
}

const NOTICE_PREFIX = 'subagent-context: ';
const notices = new WeakMap<pg.Client, string[]>();

/** What the installation's SQL said on this connection since the last call (without its prefix). */
export function takeNotices(client: pg.Client): string[] {
  const said = notices.get(client) ?? [];
  return said.splice(0, said.length);
}

/** `schema`, when given, qualifies the object a privilege error names. */
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

/**
 * The one way this package runs a transaction of its own: BEGIN (`begin`, e.g. with an isolation level),
 * `settings` local to it (behind a pooler in transaction mode the server session serves other clients
 * next), then `body`; COMMIT when it returns, unless `rollback` says to roll back what it returned (a check
 * or a read that must change nothing); ROLLBACK when it throws.
 */
export async function inTransaction<T>(client: pg.ClientBase, body: () => Promise<T>,
    { begin = 'BEGIN', settings = {}, rollback = () => false }:
    { begin?: string; settings?: Record<string, string>; rollback?: (result: T) => boolean } = {}): Promise<T> {
  await client.query(begin);
  try {
    const all = Object.entries(settings);
    if (all.length) await client.query(`SELECT ${all.map((_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, true)`).join(', ')}`, all.flat());
    const result = await body();
    await client.query(rollback(result) ? 'ROLLBACK' : 'COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** What every step of ours sets for its transaction (inStep, stepInOneTrip). */
const STEP_SETTINGS = { client_connection_check_interval: '1s' };

/**
 * Runs one bounded step of ours (a backfill batch, a reconciliation step, a repair batch) in a transaction of
 * its own, with `settings` and client_connection_check_interval, so that once this process is gone
 * (kill -9) the server stops the step within about a second instead of running it to its end. PostgreSQL
 * arms that check when a statement starts, so it is set by a statement before the step's: a SET clause on
 * the step's function comes too late and checks nothing (docs/reliability.md#locks).
 */
export async function inStep<T>(client: pg.ClientBase, step: () => Promise<T>, settings: Record<string, string> = {}): Promise<T> {
  return inTransaction(client, step, { settings: { ...STEP_SETTINGS, ...settings } });
}

/**
 * inStep for a step that stores rows a capture may have to wait for (a backfill window, a repair batch, a
 * replay): its one statement (`text`, `values` as $1, $2, ...) is sent with BEGIN, the settings and COMMIT in
 * one simple query, so the server commits the moment the statement ends. Sent as separate round trips, the
 * COMMIT waited for this process to read the result and answer; on a loaded machine that wait alone can hold
 * a stored row past capture's 200 ms (docs/reliability.md#repair). The values go in as literals
 * (inlineValues), since a simple query takes no parameters. Returns the statement's rows.
 */
export async function stepInOneTrip<R extends pg.QueryResultRow>(client: pg.ClientBase, text: string, values: unknown[] = [],
  settings: Record<string, string> = {}): Promise<R[]> {
  const statement = inlineValues(text, values);
  const all = Object.entries({ ...STEP_SETTINGS, ...settings });
  const set = `SELECT ${all.map(([k, v]) => `set_config(${stringLiteral(k)}, ${stringLiteral(v)}, true)`).join(', ')}`;
  try {
    const results = await client.query(`BEGIN; ${set}; ${statement}; COMMIT`) as unknown as pg.QueryResult<R>[];
    return results[2].rows;
  } catch (err) {
    // The statement failed (or was cancelled): the server skipped the COMMIT, the transaction is aborted.
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** What a read-only server (a standby, or default_transaction_read_only) allows: one sentence, for every command. */
export const READ_ONLY_SENTENCE = 'this server is read-only (a standby, or default_transaction_read_only is on): ' +
  'health, report and metrics read and work here; up, backfill, repair and uninstall write, so run them against the primary.';

/** Refuses, before anything is attempted, to run a command that writes on a server that cannot take writes. */
export async function assertWritable(client: pg.ClientBase): Promise<void> {
  const { rows: [{ read_only }] } = await client.query(
    `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' AS read_only`);
  if (read_only) throw new UserError(READ_ONLY_SENTENCE);
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
 * The verdict where no subagent_context_health() is there to ask (sql/metrics/not-installed.sql):
 * `trigger_orphaned` when the capture trigger was left behind, else `not_installed`. Read from the catalog
 * only, for an installation that may be half there or half removed.
 */
export async function withoutInstallation(client: pg.ClientBase, schema: string):
    Promise<{ status: 'not_installed' | 'trigger_orphaned'; trigger_installed: boolean }> {
  return (await client.query(sqlFile('metrics/not-installed.sql', schema))).rows[0];
}
