// The connection as psql, pg_dump and node-pg-migrate users give it (docs/install.md, "Connecting"): the PG*
// variables alone, libpq's key=value string, a service of pg_service.conf (named by PGSERVICE or service=,
// found through PGSERVICEFILE or ~/.pg_service.conf), and a pgpass file, through the built CLI. Whatever
// the form, the password never shows in what is printed, and pg's DeprecationWarning about pgpass is gone.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, exporterUrl, runCli, startCli } from '../helpers/cli.js';
import { startEmbeddedPostgres } from '../../demo/embedded.js';

const cli = builtCli();
const db = await freshDatabase('connection', { from: 'installed' });
const u = new URL(db.url);
const decode = decodeURIComponent;
// A server that asks the superuser for a password (the test server may trust everyone).
const secured = await startEmbeddedPostgres();
const s = new URL(secured.url);
const password = decode(s.password);
const dir = mkdtempSync(join(tmpdir(), 'sc-connection-'));
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  await secured.stop();
});

/** No connection setting of the test's own environment leaks into the child: only what a case sets. */
const clean = { DATABASE_URL: undefined, PGHOST: undefined, PGPORT: undefined, PGUSER: undefined, PGDATABASE: undefined,
  PGPASSWORD: undefined, PGSERVICE: undefined, PGSERVICEFILE: undefined, PGPASSFILE: undefined, PGSYSCONFDIR: dir, HOME: dir };
const where = (database: string, host: string, port: string) => `subagent-context report: database ${database} on ${host}:${port}, schema public`;

describe('the connection as libpq takes it', () => {
  it('from the PG* variables alone', async () => {
    const r = await runCli(cli, ['report', '--width', '100'], { ...clean, PGHOST: u.hostname, PGPORT: u.port || '5432',
      PGUSER: decode(u.username), PGPASSWORD: decode(u.password) || undefined, PGDATABASE: db.name });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(where(db.name, u.hostname, u.port || '5432'));
  });

  it('from a key=value connection string, in --database-url or DATABASE_URL; its password masked in an error', async () => {
    const conninfo = `host=${u.hostname} port=${u.port || 5432} dbname=${db.name} user='${decode(u.username)}'` +
      (u.password ? ` password='${decode(u.password)}'` : '');
    for (const [args, env] of [[['--database-url', conninfo], clean], [[], { ...clean, DATABASE_URL: conninfo }]] as const) {
      const r = await runCli(cli, ['report', '--width', '100', ...args], env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout.split('\n')[0]).toBe(where(db.name, u.hostname, u.port || '5432'));
    }
    const wrong = await runCli(cli, ['health', '--database-url', `host=127.0.0.1 port=${s.port} user=postgres dbname=nope password='not it, ${password}x'`], clean);
    expect(wrong.code).toBe(3);
    expect(wrong.stderr.trim()).toBe(`error: the database refused the login (postgres://postgres:***@127.0.0.1:${s.port}/nope): ` +
      'password authentication failed for user "postgres". Check the user and password in --database-url.');
    const bad = await runCli(cli, ['health', '--database-url', `host=127.0.0.1 password='${password} dbname=x`], clean);
    expect(bad.code).toBe(3);
    expect(bad.stderr.trim()).toBe('error: the connection string\'s value of password opens a quote that never closes: ' +
      'end it with \' (a quote inside a value is written \\\').');
    expect(bad.stderr + wrong.stderr).not.toContain(password);
  });

  it('from a service (PGSERVICEFILE, ~/.pg_service.conf, service=), its password never shown', async () => {
    const file = join(dir, 'services.conf');
    writeFileSync(file, `# kandev's database\n[other]\nhost=192.0.2.1\n\n[kandev]\nhost=127.0.0.1\nport=${s.port}\n` +
      `user=postgres\ndbname=postgres\npassword=${password}\n`);
    const health = await runCli(cli, ['health'], { ...clean, PGSERVICEFILE: file, PGSERVICE: 'kandev' });
    expect(health.stderr).toBe('');
    expect(health.stdout).toMatch(/^subagent-context health \(schema public\): not_installed$/m);
    // ~/.pg_service.conf, named from the connection string; what the string sets wins over the service.
    writeFileSync(join(dir, '.pg_service.conf'), `[kandev]\nhost=127.0.0.1\nport=${s.port}\nuser=postgres\npassword=${password}\ndbname=postgres\n`);
    const missing = await runCli(cli, ['health', '--database-url', 'service=kandev dbname=nope'], clean);
    expect(missing.code).toBe(3);
    expect(missing.stderr.trim()).toBe(`error: database "nope" does not exist (postgres://postgres:***@127.0.0.1:${s.port}/nope). ` +
      'Create the database or fix the name in --database-url.');
    // The exporter's start line names the database it reads, without the password.
    const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0'], { ...clean, PGSERVICE: 'kandev' },
      (out) => (exporterUrl(out) ? { url: exporterUrl(out)!, line: out.split('\n')[0]! } : undefined), children);
    expect(started.value.line).toMatch(new RegExp(`^serving metrics for schema "public" of postgres://postgres:\\*\\*\\*@127\\.0\\.0\\.1:${s.port}/postgres on http://`));
    const body = await (await fetch(started.value.url)).text();
    expect(body).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
    started.child.kill('SIGTERM');
    await started.exited;
    const printed = started.value.line + started.stderr() + missing.stderr + health.stdout;
    expect(started.stderr()).toBe('');
    expect(printed).not.toContain(password);
    // A service that no file defines: one sentence naming the files read.
    const none = await runCli(cli, ['health'], { ...clean, PGSERVICE: 'nowhere' });
    expect(none.code).toBe(3);
    expect(none.stderr.trim()).toBe(`error: the service "nowhere" is not defined in ${join(dir, '.pg_service.conf')} or ` +
      `${join(dir, 'pg_service.conf')}: add a [nowhere] section there, or fix the name in PGSERVICE.`);
  });

  it('the password from a pgpass file, without pg\'s DeprecationWarning; a file others may read is not used', async () => {
    const file = join(dir, 'pgpass');
    writeFileSync(file, `# host:port:database:user:password\n127.0.0.1:${s.port}:*:postgres:${password.replace(/[:\\]/g, '\\$&')}\n`);
    chmodSync(file, 0o600);
    const url = `postgres://postgres@127.0.0.1:${s.port}/postgres`;
    for (const env of [{ ...clean, PGPASSFILE: file, DATABASE_URL: url },
      { ...clean, PGPASSFILE: file, PGHOST: '127.0.0.1', PGPORT: s.port, PGUSER: 'postgres' }]) {
      const r = await runCli(cli, ['health'], env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(2);
    }
    chmodSync(file, 0o644);
    const open = await runCli(cli, ['health'], { ...clean, PGPASSFILE: file, DATABASE_URL: url });
    expect(open.code).toBe(3);
    // One warning, ours (on 4259581 pg's "WARNING: password file … permissions should be u=rw (0600)" came too),
    // then the refusal.
    expect(open.stderr).toBe(`warning: password file ${file} has group or world access, so it is not used: chmod 0600 ${file}.\n` +
      `error: the server asks for a password and none was given (postgres://postgres@127.0.0.1:${s.port}/postgres): put it in ` +
      'the URL (postgres://user:password@host:5432/database) or set PGPASSWORD.\n');
  });

  // On 4259581 each said "Check the user and password in --database-url", which none of them used.
  it('a refused login names where the user and the password came from', async () => {
    const wrong = `${password}-not-it`;
    const cases: Array<[Record<string, string | undefined>, string]> = [
      [{ ...clean, PGHOST: '127.0.0.1', PGPORT: s.port, PGUSER: 'postgres', PGPASSWORD: wrong }, 'the user (PGUSER) and the password (PGPASSWORD)'],
      [{ ...clean, DATABASE_URL: `postgres://postgres@127.0.0.1:${s.port}/postgres`, PGPASSWORD: wrong }, 'the user (DATABASE_URL) and the password (PGPASSWORD)'],
      [{ ...clean, DATABASE_URL: `postgres://postgres:${encodeURIComponent(wrong)}@127.0.0.1:${s.port}/postgres` }, 'the user and password in DATABASE_URL'],
    ];
    for (const [env, check] of cases) {
      const r = await runCli(cli, ['health'], env);
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(new RegExp(`^error: the database refused the login \\(postgres://postgres(:\\*\\*\\*)?@127\\.0\\.0\\.1:${s.port}/postgres\\): ` +
        `password authentication failed for user "postgres"\\. Check ${check.replace(/[()]/g, '\\$&')}\\.\\n$`));
    }
    const file = join(dir, 'pgpass-wrong');
    writeFileSync(file, `127.0.0.1:${s.port}:*:postgres:${wrong}\n`);
    chmodSync(file, 0o600);
    const r = await runCli(cli, ['health'], { ...clean, PGPASSFILE: file, PGHOST: '127.0.0.1', PGPORT: s.port, PGUSER: 'postgres' });
    expect(r.stderr).toContain(`Check the user (PGUSER) and the password (the password file ${file}).\n`);
  });

  it('nothing at all names a database: one sentence with every way to name one', async () => {
    const r = await runCli(cli, ['health'], clean);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: no database given: pass --database-url URL, or set DATABASE_URL, or the PG* variables ' +
      'psql reads (PGHOST, PGDATABASE, PGUSER, or PGSERVICE for an entry of pg_service.conf).');
  });

  it('refuses, by name, what libpq knows but pg cannot honour, and what is no option at all', async () => {
    const unsupported = await runCli(cli, ['health', '--database-url', 'host=db target_session_attrs=read-write'], clean);
    expect(unsupported.code).toBe(3);
    expect(unsupported.stderr.trim()).toBe('error: the connection string sets target_session_attrs, which libpq knows but this client ' +
      '(node-postgres) cannot honour: remove it, or give subagent-context a connection without it (docs/install.md#connecting).');
    const typo = await runCli(cli, ['health', '--database-url', 'host=db dbnme=kandev'], clean);
    expect(typo.code).toBe(3);
    expect(typo.stderr).toMatch(/^error: the connection string has "dbnme", which is not a connection option: the options are host, port, dbname, /);
  });
});
