// TLS as libpq means it (docs/install.md#tls), against a throwaway server with a self-signed certificate that
// accepts encrypted connections only (hostssl). Each sslmode is given every way an operator gives it: in a
// URL, in a key=value string, and in PGSSLMODE (with the certificate in PGSSLROOTCERT). `require` encrypts
// without verifying, as psql does; verify-ca and verify-full verify against sslrootcert; nothing else is
// printed (no library warning); a certificate problem and verify-full without a root are one sentence.
// On 4259581, `?sslmode=require` printed node-postgres' 11-line "SECURITY WARNING" and then failed on
// the self-signed certificate, and PGSSLMODE=require failed with a bare "self-signed certificate".
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { builtCli, runCli } from '../helpers/cli.js';
import { startEmbeddedPostgres } from '../../demo/embedded.js';

const dir = mkdtempSync(join(tmpdir(), 'sc-tls-'));
chmodSync(dir, 0o755);
/** A self-signed certificate for 127.0.0.1 (its own root), as `openssl req -x509` makes it. */
function certificate(name: string): { crt: string; key: string } {
  const crt = join(dir, `${name}.crt`), key = join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', crt], { stdio: 'ignore' });
  return { crt, key };
}
const server = certificate('server');
const other = certificate('other');
// The server runs as `postgres` when the tests run as root: its key must be that user's, readable by it alone.
chmodSync(server.key, 0o600);
if (process.getuid?.() === 0) {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(server.key, id('-u'), id('-g'));
}
const secured = await startEmbeddedPostgres({ flags: ['-c', 'ssl=on', '-c', `ssl_cert_file=${server.crt}`, '-c', `ssl_key_file=${server.key}`] });
afterAll(async () => {
  await secured.stop();
  rmSync(dir, { recursive: true, force: true });
});
// Encrypted connections only, so that a connection that works is one that was encrypted.
writeFileSync(join(secured.dataDir, 'pg_hba.conf'), 'hostssl all all 127.0.0.1/32 scram-sha-256\n');
{
  const admin = new pg.Client({ connectionString: secured.url, ssl: false });
  await admin.connect();
  await admin.query('SELECT pg_reload_conf()');
  await admin.end();
}

const cli = builtCli();
const s = new URL(secured.url);
const password = decodeURIComponent(s.password);
const url = (query: string) => `postgres://postgres:${s.password}@127.0.0.1:${s.port}/postgres${query ? `?${query}` : ''}`;
const conninfo = (extra: string) => `host=127.0.0.1 port=${s.port} dbname=postgres user=postgres password=${password} ${extra}`.trim();
const clean = { DATABASE_URL: undefined, PGHOST: undefined, PGPORT: undefined, PGUSER: undefined, PGDATABASE: undefined,
  PGPASSWORD: undefined, PGSERVICE: undefined, PGSSLMODE: undefined, PGSSLROOTCERT: undefined, PGSSLCERT: undefined,
  PGSSLKEY: undefined, HOME: dir };

/** The three spellings of one mode, with `root` as its root certificate (or none). */
function spellings(mode: string, root?: string): Array<{ how: string; args: string[]; env: Record<string, string | undefined> }> {
  const param = root ? `&sslrootcert=${encodeURIComponent(root)}` : '';
  return [
    { how: 'URL', args: ['--database-url', url(`sslmode=${mode}${param}`)], env: clean },
    { how: 'key=value', args: ['--database-url', conninfo(`sslmode=${mode}${root ? ` sslrootcert=${root}` : ''}`)], env: clean },
    { how: 'PGSSLMODE', args: ['--database-url', url('')], env: { ...clean, PGSSLMODE: mode, PGSSLROOTCERT: root } },
  ];
}

/** health on a database without an installation: it connected when it says not_installed. */
async function connects(args: string[], env: Record<string, string | undefined>) {
  const r = await runCli(cli, ['health', '--json', ...args], env);
  expect(r.stderr).toBe('');
  expect([r.code, JSON.parse(r.stdout).status]).toEqual([2, 'not_installed']);
}

describe('sslmode as libpq means it, against a self-signed server', () => {
  for (const mode of ['require', 'prefer', 'allow']) {
    it.each(spellings(mode))(`${mode} by $how: encrypted, the certificate not checked, nothing printed`, async ({ args, env }) => {
      await connects(args, env);
    });
  }

  for (const mode of ['verify-ca', 'verify-full']) {
    it.each(spellings(mode, server.crt))(`${mode} by $how with the server's root: verified and connected`, async ({ args, env }) => {
      await connects(args, env);
    });

    it.each(spellings(mode))(`${mode} by $how without a root certificate: refused in one sentence`, async ({ args, env }) => {
      const r = await runCli(cli, ['health', ...args], env);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`error: sslmode=${mode} verifies the server's certificate and no root certificate was given to ` +
        'verify it against: set sslrootcert=/path/to/root.crt (or sslrootcert=system for the system\'s CAs), or use ' +
        'sslmode=require to encrypt without verifying (docs/install.md#tls).\n');
      expect(r.code).toBe(3);
    });

    it.each(spellings(mode, other.crt))(`${mode} by $how with another root: one sentence naming the mode to use`, async ({ args, env }) => {
      const r = await runCli(cli, ['health', ...args], env);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(new RegExp(`^error: the server's certificate was not accepted under sslmode=${mode} ` +
        `\\(postgres://postgres:\\*\\*\\*@127\\.0\\.0\\.1:${s.port}/postgres[^)]*\\): self[- ]signed certificate; set sslrootcert ` +
        'to the root certificate that signed it, or use sslmode=require to encrypt without verifying \\(docs/install\\.md#tls\\)\\.\\n$'));
      expect(r.code).toBe(3);
    });
  }

  it.each(spellings('disable'))('disable by $how: not encrypted, so this server refuses the login', async ({ args, env }) => {
    const r = await runCli(cli, ['health', ...args], env);
    expect(r.stderr).toMatch(/^error: the database refused the login .*no encryption/);
    expect(r.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    expect(r.code).toBe(3);
  });

  it('sslrootcert=system outside verify-full, and a mode libpq does not know: one sentence each', async () => {
    const system = await runCli(cli, ['health', '--database-url', url('sslmode=require&sslrootcert=system')], clean);
    expect([system.code, system.stderr]).toEqual([3, 'error: sslrootcert=system needs sslmode=verify-full (libpq refuses it ' +
      'with sslmode=require): write sslmode=verify-full, or name a root certificate file (docs/install.md#tls).\n']);
    const unknown = await runCli(cli, ['health', '--database-url', url('sslmode=no-verify')], clean);
    expect([unknown.code, unknown.stderr]).toEqual([3, 'error: sslmode "no-verify" is not one of libpq\'s modes: use ' +
      'disable, allow, prefer, require, verify-ca, verify-full (docs/install.md#tls).\n']);
  });

  it('the exporter connects the same way: metrics --once with ?sslmode=require is up', async () => {
    const r = await runCli(cli, ['metrics', '--once', '--database-url', url('sslmode=require')], clean);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('subagent_context_up{schema="public"} 1\n');
  });
});
