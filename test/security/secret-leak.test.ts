// A password is never printed, whatever characters it holds and wherever it came from (docs/security.md,
// docs/install.md#connecting). Passwords holding every character a URL gives a meaning to are set on a
// role of a throwaway server that asks for them, then given through every input (--database-url and
// DATABASE_URL as a URL, percent-encoded and not; a key=value string; a service file; a pgpass file;
// PGPASSWORD), to commands that connect and to commands that fail after or before connecting, with and
// without --json and --verbose; no line of stdout or stderr holds the password, its URL-encoded form, or
// any tail of it of five characters or more.
// On 4259581, "postgres://u:p#ss/w?rd@host/db" was echoed whole in the "is not a valid URL" error, and of
// "p@ss:w/rd#?x" everything after its first @ was.
import { afterAll, describe, expect, it } from 'vitest';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { builtCli, runCli } from '../helpers/cli.js';
import { startEmbeddedPostgres } from '../../demo/embedded.js';

const PASSWORDS = ['p@ss:w/rd#?Qz!', "Kq9#/?@:%&=+;$,[]x ' \\ \"zz"];

const dir = mkdtempSync(join(tmpdir(), 'sc-leak-'));
const server = await startEmbeddedPostgres();
afterAll(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});
const s = new URL(server.url);
const host = '127.0.0.1', port = s.port;
{
  // Every role logs in with its password here (the embedded server trusts every role but the superuser).
  const admin = new pg.Client(server.url);
  await admin.connect();
  for (const [i, password] of PASSWORDS.entries()) {
    await admin.query(`CREATE ROLE leak_${i} LOGIN PASSWORD '${password.replaceAll("'", "''")}'`);
  }
  await admin.end();
  writeFileSync(join(server.dataDir, 'pg_hba.conf'), `host all all ${host}/32 scram-sha-256\n`);
  const reload = new pg.Client(server.url);
  await reload.connect();
  await reload.query('SELECT pg_reload_conf()');
  await reload.end();
}

const cli = builtCli();
const clean = { DATABASE_URL: undefined, PGHOST: undefined, PGPORT: undefined, PGUSER: undefined, PGDATABASE: undefined,
  PGPASSWORD: undefined, PGSERVICE: undefined, PGSERVICEFILE: undefined, PGPASSFILE: undefined, PGSSLMODE: undefined,
  PGSYSCONFDIR: dir, HOME: dir };
const quoted = (v: string) => `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/** Every way of giving role `user` its `password` for database `dbname`. */
function inputs(user: string, password: string, dbname: string) {
  const service = join(dir, `${user}-${dbname}.service`);
  writeFileSync(service, `[leak]\nhost=${host}\nport=${port}\nuser=${user}\ndbname=${dbname}\npassword=${password}\n`);
  const pgpass = join(dir, `${user}-${dbname}.pgpass`);
  writeFileSync(pgpass, `${host}:${port}:*:${user}:${password.replaceAll('\\', '\\\\').replaceAll(':', '\\:')}\n`);
  chmodSync(pgpass, 0o600);
  const encoded = `postgres://${user}:${encodeURIComponent(password)}@${host}:${port}/${dbname}`;
  const raw = `postgres://${user}:${password}@${host}:${port}/${dbname}`;
  return [
    { how: '--database-url, encoded', args: ['--database-url', encoded], env: clean },
    { how: 'DATABASE_URL, encoded', args: [], env: { ...clean, DATABASE_URL: encoded } },
    { how: '--database-url, as typed', args: ['--database-url', raw], env: clean },
    { how: 'DATABASE_URL, as typed', args: [], env: { ...clean, DATABASE_URL: raw } },
    { how: 'key=value', args: ['--database-url', `host=${host} port=${port} user=${user} dbname=${dbname} password=${quoted(password)}`], env: clean },
    { how: 'service file', args: [], env: { ...clean, PGSERVICE: 'leak', PGSERVICEFILE: service } },
    { how: 'pgpass', args: ['--database-url', `postgres://${user}@${host}:${port}/${dbname}`], env: { ...clean, PGPASSFILE: pgpass } },
    { how: 'PGPASSWORD', args: [], env: { ...clean, PGHOST: host, PGPORT: port, PGUSER: user, PGDATABASE: dbname, PGPASSWORD: password } },
  ];
}

/** The password, its URL-encoded form, and every tail of it five characters or longer. */
function forms(password: string): string[] {
  const out = new Set([password, encodeURIComponent(password)]);
  for (let i = 1; password.length - i >= 5; i++) out.add(password.slice(i));
  return [...out];
}

const COMMANDS = [['health', '--verbose'], ['health', '--json'], ['metrics', '--once']];

describe.each(PASSWORDS.map((password, i) => ({ password, user: `leak_${i}` })))('the password $password', ({ password, user }) => {
  for (const dbname of ['postgres', 'no_such_database']) {
    it.each(inputs(user, password, dbname))(`given by $how, database ${dbname}: never printed`, async ({ how, args, env }) => {
      for (const command of COMMANDS) {
        const r = await runCli(cli, [...command, ...args], env);
        const printed = `${r.stdout}\n${r.stderr}`;
        for (const form of forms(password)) expect(printed, `${command.join(' ')} printed ${form}`).not.toContain(form);
        // Connected where the input is right (health: not installed, exit 2); one error sentence (exit 3) otherwise.
        const connects = dbname === 'postgres' && !how.endsWith('as typed');
        if (command[0] === 'health') expect(r.code, printed).toBe(connects ? 2 : 3);
        else expect(r.stdout.includes('subagent_context_up{schema="public"} 1'), printed).toBe(connects);
      }
    });
  }
});
