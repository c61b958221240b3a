// TLS as libpq means it (docs/install.md#tls). node-postgres reads `sslmode` its own way: `require` verifies
// the certificate and prints a many-line warning, PGSSLMODE=require verifies too. Here sslmode, sslrootcert,
// sslcert and sslkey (from the URL, which src/connection.ts also builds from a key=value string and a
// service, or from PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY) become pg's `ssl` option with libpq's
// meanings, and are taken out of the URL pg reads, so that pg applies none of its own.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import pg from 'pg';
import { UserError } from './errors.js';
import { pinSearchPath } from './search-path.js';

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** The URL's parameters that are ours to apply (pg's `ssl` and `uselibpqcompat` too: they would override ours). */
const TLS_PARAMS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'uselibpqcompat'];

interface Tls {
  /** The mode given, or undefined: then the connection is what pg makes of the URL (unencrypted unless ?ssl=). */
  mode: SslMode | undefined;
  rootcert: string | undefined;
  cert: string | undefined;
  key: string | undefined;
  socket: boolean;
}

function read(url: string, env: NodeJS.ProcessEnv): { tls: Tls; stripped: string } {
  const parsed = new URL(url);
  const q = parsed.searchParams;
  const given = q.get('sslmode') ?? env.PGSSLMODE ?? undefined;
  if (given !== undefined && !(SSL_MODES as readonly string[]).includes(given)) {
    throw new UserError(`sslmode "${given}" is not one of libpq's modes: use ${SSL_MODES.join(', ')} (docs/install.md#tls).`);
  }
  const host = q.get('host') ?? decodeURIComponent(parsed.hostname);
  const tls: Tls = {
    mode: given as SslMode | undefined,
    rootcert: q.get('sslrootcert') ?? env.PGSSLROOTCERT ?? undefined,
    cert: q.get('sslcert') ?? env.PGSSLCERT ?? undefined,
    key: q.get('sslkey') ?? env.PGSSLKEY ?? undefined,
    // libpq never encrypts a Unix socket connection, whatever sslmode says.
    socket: (host || env.PGHOST || '').startsWith('/'),
  };
  for (const p of TLS_PARAMS) q.delete(p);
  return { tls, stripped: parsed.toString() };
}

/** The sslmode a connection URL (with PGSSLMODE) asks for, for the sentence an error becomes. */
export function sslModeOf(url: string | undefined, env: NodeJS.ProcessEnv = process.env): SslMode | undefined {
  try { return url ? read(url, env).tls.mode : undefined; } catch { return undefined; }
}

/** libpq's files when nothing names one: ~/.postgresql/root.crt, postgresql.crt, postgresql.key. */
const defaultFile = (name: string) => {
  const file = join(homedir(), '.postgresql', name);
  return existsSync(file) ? file : undefined;
};

function contents(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new UserError(`cannot read ${what} ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): ` +
      'fix the path or the file\'s permissions (docs/install.md#tls).');
  }
}

/** pg's `ssl` for an encrypted attempt, as libpq would verify it. */
function encrypted(tls: Tls, mode: SslMode): ConnectionOptions {
  const options: ConnectionOptions = {};
  const certFile = tls.cert ?? defaultFile('postgresql.crt');
  const keyFile = tls.key ?? defaultFile('postgresql.key');
  if (certFile) options.cert = contents(certFile, 'sslcert');
  if (keyFile && certFile) options.key = contents(keyFile, 'sslkey');
  if (tls.rootcert === 'system') {
    // libpq: the system's roots are only ever used with host name checking.
    if (mode !== 'verify-full') {
      throw new UserError(`sslrootcert=system needs sslmode=verify-full (libpq refuses it with sslmode=${mode}): ` +
        'write sslmode=verify-full, or name a root certificate file (docs/install.md#tls).');
    }
    return { ...options, rejectUnauthorized: true };
  }
  const rootFile = tls.rootcert ?? defaultFile('root.crt');
  if (!rootFile) {
    if (mode === 'verify-ca' || mode === 'verify-full') {
      throw new UserError(`sslmode=${mode} verifies the server's certificate and no root certificate was given to verify ` +
        'it against: set sslrootcert=/path/to/root.crt (or sslrootcert=system for the system\'s CAs), or use ' +
        'sslmode=require to encrypt without verifying (docs/install.md#tls).');
    }
    // require, prefer, allow: encrypted, the certificate not checked.
    return { ...options, rejectUnauthorized: false };
  }
  options.ca = contents(rootFile, 'sslrootcert');
  options.rejectUnauthorized = true;
  // A root certificate makes every mode verify the chain (libpq's compatibility rule); only verify-full the name.
  if (mode !== 'verify-full') options.checkServerIdentity = () => undefined;
  return options;
}

/**
 * What pg is given, attempt by attempt: the URL without the TLS parameters and the `ssl` option. prefer
 * tries TLS first and goes on unencrypted when the server has no TLS; allow tries unencrypted first and
 * then TLS when the server requires it; every other mode is one attempt.
 */
export function connectionAttempts(url: string, env: NodeJS.ProcessEnv = process.env): Array<{ connectionString: string; ssl?: false | ConnectionOptions }> {
  const { tls, stripped } = read(url, env);
  if (!tls.mode) {
    // No sslmode anywhere: pg's own reading of the URL, with certificate files meaning libpq's default, prefer.
    if (tls.socket || !(tls.rootcert || tls.cert || tls.key)) return [{ connectionString: removeOnlyLibpqCompat(url) }];
    return [{ connectionString: stripped, ssl: encrypted(tls, 'prefer') }, { connectionString: stripped, ssl: false }];
  }
  if (tls.mode === 'disable' || tls.socket) return [{ connectionString: stripped, ssl: false }];
  const ssl = encrypted(tls, tls.mode);
  if (tls.mode === 'prefer') return [{ connectionString: stripped, ssl }, { connectionString: stripped, ssl: false }];
  if (tls.mode === 'allow') return [{ connectionString: stripped, ssl: false }, { connectionString: stripped, ssl }];
  return [{ connectionString: stripped, ssl }];
}

function removeOnlyLibpqCompat(url: string): string {
  const parsed = new URL(url);
  if (!parsed.searchParams.has('uselibpqcompat')) return url;
  parsed.searchParams.delete('uselibpqcompat');
  return parsed.toString();
}

/**
 * src/connection.ts reads the pgpass file as libpq does (and says once when it may not use it); pg would
 * read it again when the server asks for a password, warning a second time about a file others may read.
 * pg asks a password given as a function, and reads no file then: none is what the resolution found.
 */
function withoutOwnPgpass(client: pg.Client): void {
  const internals = client as unknown as { password: unknown };
  if (internals.password === null || internals.password === undefined) internals.password = () => undefined;
}

/** Whether the next attempt may follow this failure: the server has no TLS (prefer) or requires it (allow). */
function fallsThrough(err: unknown, encryptedAttempt: boolean): boolean {
  const e = err as { code?: string; message?: string };
  if (encryptedAttempt) return /does not support SSL/i.test(String(e?.message));
  return e?.code === '28000' && /no encryption/i.test(String(e?.message));
}

/**
 * A connected pg client for `url` with `options` (application_name, timeouts), TLS as libpq means it.
 * `prepare` sees each client before it connects (its event handlers). A failed attempt's client is ended.
 */
export async function connectClient(url: string, options: pg.ClientConfig = {},
  prepare: (client: pg.Client) => void = (c) => { c.on('error', () => {}); }, env: NodeJS.ProcessEnv = process.env): Promise<pg.Client> {
  const attempts = connectionAttempts(url, env);
  for (const [i, attempt] of attempts.entries()) {
    // Nothing sent on it resolves a name another role can plant (src/search-path.ts).
    const client = pinSearchPath(new pg.Client({ ...options, ...attempt }));
    withoutOwnPgpass(client);
    prepare(client);
    try {
      await client.connect();
      return client;
    } catch (err) {
      await client.end().catch(() => {});
      if (i + 1 < attempts.length && fallsThrough(err, Boolean(attempt.ssl))) continue;
      throw err;
    }
  }
  throw new Error('unreachable: no connection attempt');
}

/** Node's names for a certificate it did not accept. */
const CERTIFICATE_ERRORS = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME/;

/**
 * A TLS failure as one sentence naming the mode to use, or undefined when `err` is no TLS failure.
 * `where` is the redacted connection, in parentheses.
 */
export function tlsSentence(err: unknown, url: string | undefined, where: string): string | undefined {
  const e = err as { code?: string; message?: string };
  const message = String(e?.message ?? err);
  const mode = sslModeOf(url) ?? 'prefer';
  if (CERTIFICATE_ERRORS.test(e?.code ?? '')) {
    const fix = /ALTNAME|Hostname/i.test(`${e.code} ${message}`)
      ? 'connect by a name the certificate holds, or use sslmode=verify-ca to verify the certificate without its name'
      : 'set sslrootcert to the root certificate that signed it, or use sslmode=require to encrypt without verifying';
    return `the server's certificate was not accepted under sslmode=${mode}${where}: ${message.replace(/\.$/, '')}; ${fix} ` +
      '(docs/install.md#tls).';
  }
  if (/does not support SSL/i.test(message)) {
    return `the server does not accept TLS connections and sslmode=${mode} requires one${where}: enable ssl on the server, ` +
      'or use sslmode=prefer (TLS when the server offers it) or disable (docs/install.md#tls).';
  }
  return undefined;
}
