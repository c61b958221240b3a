// Which database a command connects to, as psql, pg_dump and node-pg-migrate users expect (libpq's rules):
// a postgres:// URL, or libpq's `key=value` connection string, or nothing but the PG* variables; a service
// from pg_service.conf (service=, ?service=, PGSERVICE) fills what the string leaves out, the variables
// fill what is still missing, and a pgpass file gives the password when nothing else did. The answer is one
// postgres:// URL, which every connection of this process (and its error messages, redacted) then uses.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import { UserError } from './errors.js';
import { misplacedAt, redactUrl, rememberSecret } from './secrets.js';
import { safe } from './output.js';

type Keywords = Record<string, string>;

/**
 * Where the user name and the password of the resolved connection came from, for the sentence a refused
 * login becomes: `by` names the string's source (--database-url or DATABASE_URL), the others a variable or
 * a file (undefined: the string itself).
 */
let origin: { by: string; user: string | undefined; password: string | undefined } = { by: '--database-url / DATABASE_URL', user: undefined, password: undefined };

/** What a refused login asks the operator to check: the user and the password where they came from. */
export function credentialsToCheck(): string {
  const user = origin.user ?? origin.by;
  const password = origin.password ?? origin.by;
  return user === password ? `the user and password in ${user}` : `the user (${user}) and the password (${password})`;
}


/** libpq's keywords that pg applies; their values go into the URL. */
const APPLIED = new Set(['host', 'port', 'dbname', 'user', 'password', 'passfile', 'service', 'sslmode', 'sslcert', 'sslkey',
  'sslrootcert', 'sslnegotiation', 'application_name', 'fallback_application_name', 'options']);
/** libpq's keywords that only tune the attempt (pg has no such setting, and speaks UTF-8): accepted, without effect. */
const WITHOUT_EFFECT = new Set(['connect_timeout', 'keepalives', 'keepalives_idle', 'keepalives_interval', 'keepalives_count',
  'tcp_user_timeout', 'client_encoding']);
/** libpq's keywords that decide where or how safely to connect, which pg cannot honour: refused by name. */
const UNSUPPORTED = new Set(['hostaddr', 'target_session_attrs', 'load_balance_hosts', 'channel_binding', 'require_auth',
  'requirepeer', 'gssencmode', 'gsslib', 'gssdelegation', 'krbsrvname', 'sslpassword', 'sslcrl', 'sslcrldir', 'sslsni',
  'sslcompression', 'sslcertmode', 'ssl_min_protocol_version', 'ssl_max_protocol_version', 'replication', 'requiressl']);

/** The variables that name a database by themselves (PGPASSWORD alone names none). */
const CONNECTION_VARIABLES = ['PGHOST', 'PGPORT', 'PGDATABASE', 'PGUSER', 'PGSERVICE'];

/** Where libpq looks for a Unix socket when no host is given: Debian's directory, then upstream's. */
const SOCKET_DIRECTORIES = ['/var/run/postgresql', '/tmp'];
/** Debian's libpq reads the system-wide service file from here unless PGSYSCONFDIR says otherwise. */
const SYSTEM_CONFIG_DIRECTORY = '/etc/postgresql-common';

/**
 * The postgres:// URL for what the operator gave: --database-url or DATABASE_URL (`given`), else the PG*
 * variables; undefined when nothing names a database. Refuses, in one sentence, what libpq would refuse.
 */
export function resolveConnection(given: string | undefined, env: NodeJS.ProcessEnv = process.env,
  givenBy = '--database-url / DATABASE_URL'): string | undefined {
  const text = given?.trim();
  origin = { by: givenBy, user: undefined, password: undefined };
  if (text && /^postgres(ql)?:\/\//i.test(text)) return fromUrl(text, env);
  if (text && text.includes('=') && !/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return fromKeywords(parseConnectionString(text), env);
  if (text) {
    throw new UserError('--database-url / DATABASE_URL must be a URL like postgres://user:password@host:5432/database ' +
      `or a connection string like "host=db dbname=kandev user=kandev", got "${redactUrl(text)}".`);
  }
  if (!CONNECTION_VARIABLES.some((v) => env[v])) return undefined;
  return fromKeywords({}, env);
}

/**
 * libpq's `keyword=value` string: pairs separated by whitespace, spaces allowed around `=`, a value in single
 * quotes when it holds spaces or is empty, with \' and \\ inside.
 */
export function parseConnectionString(text: string): Keywords {
  const out: Keywords = {};
  let i = 0;
  const space = () => { while (i < text.length && /\s/.test(text[i]!)) i++; };
  for (space(); i < text.length; space()) {
    const start = i;
    while (i < text.length && !/[\s=]/.test(text[i]!)) i++;
    const keyword = text.slice(start, i);
    space();
    if (text[i] !== '=') {
      // Not quoted back: a word without "=" may be the rest of a password that holds a space.
      throw new UserError(`the connection string has a word that is not keyword=value (word ${Object.keys(out).length + 1}): ` +
        'write it as keyword=value pairs (host=db port=5432 dbname=kandev user=kandev), a value with spaces in single quotes.');
    }
    i++;
    space();
    let value = '';
    if (text[i] === "'") {
      for (i++; ; i++) {
        if (i >= text.length) {
          throw new UserError(`the connection string's value of ${keyword} opens a quote that never closes: end it with ' ` +
            '(a quote inside a value is written \\\').');
        }
        if (text[i] === '\\' && i + 1 < text.length) value += text[++i];
        else if (text[i] === "'") { i++; break; } else value += text[i];
      }
    } else {
      for (; i < text.length && !/\s/.test(text[i]!); i++) value += text[i] === '\\' && i + 1 < text.length ? text[++i] : text[i];
    }
    out[keyword] = value;
  }
  for (const keyword of Object.keys(out)) checkKeyword(keyword, 'the connection string');
  return out;
}

function checkKeyword(keyword: string, where: string): void {
  if (APPLIED.has(keyword) || WITHOUT_EFFECT.has(keyword)) return;
  if (UNSUPPORTED.has(keyword)) {
    throw new UserError(`${where} sets ${keyword}, which libpq knows but this client (node-postgres) cannot honour: ` +
      'remove it, or give subagent-context a connection without it (docs/install.md#connecting).');
  }
  throw new UserError(`${where} has "${safe(keyword)}", which is not a connection option: the options are ` +
    `${[...APPLIED].join(', ')} (docs/install.md#connecting).`);
}

/** A URL as given, with what a service (?service= or PGSERVICE) and a pgpass file add; unchanged when they add nothing. */
function fromUrl(url: string, env: NodeJS.ProcessEnv): string {
  let parsed: URL | undefined;
  try { parsed = new URL(url); } catch { /* said below */ }
  // An `@` past the host's place: the password holds / ? or # unencoded, and a parser would read a wrong host.
  if (!parsed || misplacedAt(url)) {
    throw new UserError(`--database-url / DATABASE_URL is not a valid URL: "${redactUrl(url)}"; write it as ` +
      'postgres://user:password@host:5432/database, percent-encoding special characters in the password ' +
      '(@ as %40, : as %3A, / as %2F, ? as %3F, # as %23, % as %25), or give a connection string (password=\'…\').');
  }
  const decode = (s: string) => { try { return decodeURIComponent(s); } catch { return s; } };
  const keywords: Keywords = {};
  const host = decode(parsed.hostname).replace(/^\[(.*)\]$/, '$1');
  if (host) keywords.host = host;
  if (parsed.port) keywords.port = parsed.port;
  if (parsed.username) keywords.user = decode(parsed.username);
  if (parsed.password) keywords.password = decode(parsed.password);
  const dbname = decode(parsed.pathname.slice(1));
  if (dbname) keywords.dbname = dbname;
  const query: Keywords = {};
  for (const [k, v] of parsed.searchParams) query[k] = v;
  const service = query.service ?? env.PGSERVICE;
  if (!service && keywords.password) return url;
  const filled = service ? withService(keywords, service, env, query) : keywords;
  // What pg fills in from the environment and its defaults, for the pgpass lookup only.
  const user = filled.user ?? env.PGUSER ?? env.USER ?? '';
  const password = filled.password ?? (env.PGPASSWORD ? undefined : pgpassPassword({
    host: filled.host ?? env.PGHOST ?? 'localhost', port: filled.port ?? env.PGPORT ?? '5432', user, dbname: filled.dbname ?? env.PGDATABASE ?? user,
  }, query.passfile ?? filled.passfile, env));
  noteOrigin(keywords, filled, service, password, env);
  if (!service && password === undefined) return url;
  const { service: _service, passfile: _passfile, ...rest } = query;
  return buildUrl({ ...filled, ...(password === undefined ? {} : { password }) }, rest);
}

/** A connection string or the variables alone: every part resolved as libpq does, the URL complete. */
function fromKeywords(given: Keywords, env: NodeJS.ProcessEnv): string {
  const service = given.service ?? env.PGSERVICE;
  const k = service ? withService(given, service, env) : given;
  const port = k.port ?? env.PGPORT ?? '5432';
  const host = k.host ?? env.PGHOST ?? defaultHost(port);
  const user = k.user ?? env.PGUSER ?? osUser();
  const dbname = k.dbname ?? env.PGDATABASE ?? user;
  // PGPASSWORD is pg's to read (it comes after every setting above, as in libpq); a pgpass file after that.
  const password = k.password ?? (env.PGPASSWORD ? undefined : pgpassPassword({ host, port, user, dbname }, k.passfile, env));
  noteOrigin(given, k, service, password, env);
  return buildUrl({ ...k, host, port, user, dbname, ...(password === undefined ? {} : { password }) }, {});
}

/**
 * Records where the user and the password came from: the string (`given`), the service (`filled` has what
 * `given` had not), PGUSER / PGPASSWORD, the pgpass file pgpassPassword() read, or nowhere.
 */
function noteOrigin(given: Keywords, filled: Keywords, service: string | undefined, password: string | undefined,
  env: NodeJS.ProcessEnv): void {
  const fromService = `the service "${service}" in ${serviceFileRead}`;
  origin.user = given.user !== undefined ? undefined : filled.user !== undefined ? fromService
    : env.PGUSER ? 'PGUSER' : 'the operating-system user name';
  origin.password = given.password !== undefined ? undefined : filled.password !== undefined ? fromService
    : env.PGPASSWORD ? 'PGPASSWORD' : password !== undefined ? `the password file ${pgpassFileRead}` : 'none was given';
}

/** The files the last resolution read a service and a password from (for noteOrigin). */
let serviceFileRead = '';
let pgpassFileRead = '';

/** Where each connection part goes in the URL: these in its authority and path, the others in its query. */
const IN_AUTHORITY = new Set(['host', 'port', 'user', 'password', 'dbname', 'service', 'passfile']);

/**
 * The URL of resolved keywords `k` and a URL's own query parameters `query` (kept as given). A setting that
 * comes from a connection string or a service goes into the query when pg applies it; sslmode and the
 * certificates, wherever they come from, are read by src/tls.ts as libpq reads them.
 */
function buildUrl(k: Keywords, query: Keywords): string {
  if (k.password) rememberSecret(k.password);
  const params: Keywords = { ...query };
  for (const [keyword, value] of Object.entries(k)) {
    if (APPLIED.has(keyword) && !IN_AUTHORITY.has(keyword) && params[keyword] === undefined) params[keyword] = value;
  }
  const userinfo = k.user || k.password
    ? `${encodeURIComponent(k.user ?? '')}${k.password ? `:${encodeURIComponent(k.password)}` : ''}@` : '';
  // A socket directory is written percent-encoded in the host's place (libpq's URI form); an IPv6 address in brackets.
  const host = !k.host ? '' : k.host.startsWith('/') ? encodeURIComponent(k.host) : k.host.includes(':') ? `[${k.host}]` : k.host;
  const search = new URLSearchParams(params).toString();
  return `postgres://${userinfo}${host}${k.port ? `:${k.port}` : ''}/${encodeURIComponent(k.dbname ?? '')}${search ? `?${search}` : ''}`;
}

function osUser(): string {
  try { return userInfo().username; } catch { return process.env.USER ?? 'postgres'; }
}

/** libpq's default host: the Unix socket directory that has the server's socket, else localhost. */
function defaultHost(port: string): string {
  return SOCKET_DIRECTORIES.find((dir) => existsSync(join(dir, `.s.PGSQL.${port}`))) ?? 'localhost';
}

/** The service file a user keeps (PGSERVICEFILE, else ~/.pg_service.conf) and the system's. */
function serviceFiles(env: NodeJS.ProcessEnv): string[] {
  return [env.PGSERVICEFILE || join(homedir(), '.pg_service.conf'), join(env.PGSYSCONFDIR || SYSTEM_CONFIG_DIRECTORY, 'pg_service.conf')];
}

/**
 * `given` with what the service's section sets where `given` (and `also`, a URL's query) sets nothing. As in
 * libpq: the first file that has the section is read, lines are `keyword=value` with nothing around `=`, `#`
 * starts a comment, and a service the files do not define is an error.
 */
function withService(given: Keywords, service: string, env: NodeJS.ProcessEnv, also: Keywords = {}): Keywords {
  const files = serviceFiles(env);
  for (const file of files) {
    if (!existsSync(file)) continue;
    const lines = readFileSync(file, 'utf8').split(/\r?\n/);
    let inSection = false;
    const found: Keywords = {};
    let defined = false;
    for (const [n, raw] of lines.entries()) {
      const line = raw.trim();
      if (!line || line.startsWith('#')) continue;
      if (line.startsWith('[')) {
        if (inSection) break;
        inSection = line === `[${service}]`;
        defined ||= inSection;
        continue;
      }
      if (!inSection) continue;
      const eq = line.indexOf('=');
      const where = `the service file ${file}, line ${n + 1},`;
      if (eq <= 0) throw new UserError(`${where} is not keyword=value: fix that line (libpq's format: host=db, one a line).`);
      const keyword = line.slice(0, eq);
      if (keyword === 'service') throw new UserError(`${where} names another service: a service cannot include one; copy its settings instead.`);
      checkKeyword(keyword, where);
      found[keyword] = line.slice(eq + 1);
    }
    if (!defined) continue;
    const out = { ...given };
    for (const [keyword, value] of Object.entries(found)) {
      if (out[keyword] === undefined && also[keyword] === undefined) out[keyword] = value;
    }
    if (found.password && out.password === found.password) rememberSecret(found.password);
    serviceFileRead = file;
    return out;
  }
  throw new UserError(`the service "${service}" is not defined in ${files.join(' or ')}: add a [${service}] section ` +
    `there, or fix the name in ${given.service === undefined ? 'PGSERVICE' : 'service='}.`);
}

/**
 * The password a pgpass file gives for this connection (PGPASSFILE or passfile=, else ~/.pgpass), as libpq
 * reads it: lines host:port:database:user:password, `*` for any, `\:` and `\\` escaped, localhost matching
 * the Unix socket too; a file that the group or others may read is not used (and said so).
 */
function pgpassPassword(c: { host: string; port: string; user: string; dbname: string }, passfile: string | undefined,
  env: NodeJS.ProcessEnv): string | undefined {
  const file = passfile || env.PGPASSFILE || join(homedir(), '.pgpass');
  let mode: number;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) return undefined;
    mode = stat.mode;
  } catch {
    return undefined;
  }
  if (mode & 0o077) {
    console.error(`warning: password file ${file} has group or world access, so it is not used: chmod 0600 ${file}.`);
    return undefined;
  }
  const host = c.host.startsWith('/') && SOCKET_DIRECTORIES.includes(c.host.replace(/\/$/, '')) ? 'localhost' : c.host;
  for (const line of readFileSync(file, 'utf8').split(/\r?\n/)) {
    if (!line || line.startsWith('#')) continue;
    const fields: string[] = [''];
    for (let i = 0; i < line.length; i++) {
      if (line[i] === '\\' && i + 1 < line.length) fields[fields.length - 1] += line[++i];
      else if (line[i] === ':' && fields.length < 5) fields.push('');
      else fields[fields.length - 1] += line[i];
    }
    if (fields.length < 5) continue;
    const [h, p, d, u, password] = fields as [string, string, string, string, string];
    const matches = (pattern: string, value: string) => pattern === '*' || pattern === value;
    if (matches(h, host) && matches(p, c.port) && matches(d, c.dbname) && matches(u, c.user)) {
      rememberSecret(password);
      pgpassFileRead = file;
      return password;
    }
  }
  return undefined;
}
