// CLI hygiene, through the built command as an operator runs it: --help with examples on every command,
// and every error an operator can hit as one sentence that says what to do, a non-zero exit, no stack
// trace unless --verbose, no colour with NO_COLOR.
import { describe, it, expect, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { safeLines } from '../../src/output.js';
import { startEmbeddedPostgres } from '../../demo/embedded.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { PG_MIGRATE_LOCK_ID } from 'node-pg-migrate';

const cli = builtCli();
const db = await freshDatabase('cli');
await db.createHost('kandev');          // host tables, nothing installed
await db.query('CREATE SCHEMA bare');   // not even host tables
// A server with password authentication, for the wrong-password error (the embedded server uses scram).
const secured = await startEmbeddedPostgres();
afterAll(() => secured.stop());

const COMMANDS = ['up', 'backfill', 'health', 'repair', 'report', 'metrics', 'uninstall', 'demo'];
const DB_COMMANDS: string[][] = [['up'], ['backfill'], ['health'], ['repair'], ['report'], ['metrics', '--once'], ['uninstall']];
const NO_DATABASE = 'error: no database given: pass --database-url URL, or set DATABASE_URL, or the PG* variables psql reads ' +
  '(PGHOST, PGDATABASE, PGUSER, or PGSERVICE for an entry of pg_service.conf).';
const noStack = (s: string) => expect(s, 'no stack trace').not.toMatch(/^\s+at /m);

// The CLI-only cases share no state: each spawns its own process, so they run side by side.
describe.concurrent('help', () => {
  it('lists every command; no command at all is a usage error', async () => {
    const help = await runCli(cli, ['--help']);
    expect(help.code).toBe(0);
    for (const c of COMMANDS) expect(help.stdout).toMatch(new RegExp(`^  ${c} +\\S`, 'm'));
    const none = await runCli(cli, []);
    expect(none.code).toBe(3);
    expect(none.stderr).toBe(help.stdout);
  });

  it.each(COMMANDS)('%s --help shows usage and at least one example, exit 0', async (c) => {
    const r = await runCli(cli, [c, '--help']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(new RegExp(`^subagent-context ${c}\\b`));
    expect(r.stdout).toMatch(/^Examples?:\n( {2}.+\n?)+/m);
    expect(r.stdout).toContain(c === 'demo' ? 'npm start' : `subagent-context ${c}`);
  });

  it('an unknown command or option is one sentence pointing at --help, exit 3', async () => {
    const cmd = await runCli(cli, ['fanout']);
    expect(cmd.code).toBe(3);
    expect(cmd.stderr.trim()).toBe('error: unknown command "fanout". Run `subagent-context --help` for the list.');
    const opt = await runCli(cli, ['report', '--colour']);
    expect(opt.code).toBe(3);
    expect(opt.stderr.trim()).toBe('error: unknown option --colour. Run `subagent-context report --help`.');
  });

  it.each([
    [['helth'], 'error: unknown command "helth": did you mean `subagent-context health`? Run `subagent-context --help` for the list.'],
    [['uninstal'], 'error: unknown command "uninstal": did you mean `subagent-context uninstall`? Run `subagent-context --help` for the list.'],
    [['health', '--jsn'], 'error: unknown option --jsn: did you mean --json? Run `subagent-context health --help`.'],
    [['up', '--databse-url', 'x'], 'error: unknown option --databse-url: did you mean --database-url? Run `subagent-context up --help`.'],
    [['uninstall', '--drop'], 'error: unknown option --drop: did you mean --drop-data? Run `subagent-context uninstall --help`.'],
    [['report', '--since'], 'error: --since needs a value, as in --since VALUE. Run `subagent-context report --help`.'],
    [['health', '--json=yes'], 'error: --json is a switch and takes no value, got "--json=yes". Run `subagent-context health --help`.'],
  ])('%j: one sentence with the nearest name, exit 3', async (args, message) => {
    const r = await runCli(cli, args);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`${message}\n`);
  });
});

describe.concurrent('connection errors, for every command that needs a database', () => {
  it.each(DB_COMMANDS)('%s: no database, unreachable, wrong password, missing database', async (...args) => {
    const none = await runCli(cli, args);
    expect(none.code).toBe(3);
    expect(none.stderr.trim()).toBe(NO_DATABASE);

    const unreachable = await runCli(cli, [...args, '--database-url', 'postgres://postgres@127.0.0.1:1/kandev']);
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr.trim()).toBe('error: cannot reach the database (postgres://postgres@127.0.0.1:1/kandev): ' +
      'connect ECONNREFUSED 127.0.0.1:1. Check --database-url / DATABASE_URL and that the server is running.');
    noStack(unreachable.stderr);

    const u = new URL(secured.url);
    u.password = 'not-the-password';
    const refused = await runCli(cli, args, { DATABASE_URL: u.toString() });
    expect(refused.code).toBe(3);
    expect(refused.stderr.trim()).toBe(`error: the database refused the login (postgres://postgres:***@${u.host}/postgres): ` +
      'password authentication failed for user "postgres". Check the user and password in DATABASE_URL.');
    expect(refused.stderr).not.toContain('not-the-password');

    // health --json is one object on stdout whatever went wrong, the sentence in it (on 4259581: nothing on stdout).
    if (args[0] === 'health') {
      const json = await runCli(cli, [...args, '--json', '--database-url', 'postgres://postgres@127.0.0.1:1/kandev']);
      expect([json.code, JSON.parse(json.stdout)]).toEqual([3, { status: 'error', error: 'cannot reach the database ' +
        '(postgres://postgres@127.0.0.1:1/kandev): connect ECONNREFUSED 127.0.0.1:1. Check --database-url / DATABASE_URL and ' +
        'that the server is running.' }]);
    }

    const u2 = new URL(db.url);
    u2.pathname = '/no_such_database';
    const missing = await runCli(cli, [...args, '--database-url', u2.toString()]);
    expect(missing.code).toBe(3);
    expect(missing.stderr.trim()).toMatch(/^error: database "no_such_database" does not exist \(.*\)\. Create the database or fix the name in --database-url\.$/);
  });
});

describe('errors about the target schema', () => {
  const env = () => ({ DATABASE_URL: db.url });

  it("up: kandev's tables missing, and a schema that does not exist", async () => {
    const bare = await runCli(cli, ['up', '--schema', 'bare'], env());
    expect(bare.code).toBe(3);
    // Said once: not "error: subagent-context: …", the prefix the installation's own messages carry.
    expect(bare.stderr.trim()).toBe(`error: kandev's host tables are missing in schema "bare": ` +
      `kandev_meta, task_sessions, task_session_messages. Install into the schema that holds kandev's tables (--schema).`);
    for (const c of [['up'], ['report'], ['metrics', '--once']]) {
      const r = await runCli(cli, [...c, '--schema', 'nope'], env());
      expect(r.code, c.join(' ')).toBe(3);
      expect(r.stderr.trim()).toBe(`error: schema "nope" not found. Pass the schema that holds kandev's tables with --schema.`);
    }
  });

  it.each([
    [['backfill'], 'function kandev.subagent_context_backfill_step() does not exist'],
    [['repair'], 'function kandev.subagent_context_reconcile(timestamp without time zone) does not exist'],
    [['report'], 'relation "kandev.task_session_subagents" does not exist'],
  ])('%s before installation says to run up', async (args, what) => {
    const r = await runCli(cli, [...args, '--schema', 'kandev'], env());
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe(`error: ${what}: subagent-context does not look installed in this schema. Run \`subagent-context up\` first.`);
    noStack(r.stderr);
  });

  it('health on a schema that does not exist says so, exit 3 (could not check: never 0, 1 or 2)', async () => {
    const r = await runCli(cli, ['health', '--schema', 'nope'], env());
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe(`error: schema "nope" not found. Pass the schema that holds kandev's tables with --schema.`);
  });

  it('uninstall where nothing is installed says so and changes nothing; a missing schema is an error', async () => {
    const r = await runCli(cli, ['uninstall', '--schema', 'kandev'], env());
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('nothing to uninstall: subagent-context is not installed in schema "kandev"');
    const gone = await runCli(cli, ['uninstall', '--schema', 'nope'], env());
    expect(gone.code).toBe(3);
    expect(gone.stderr.trim()).toBe(`error: schema "nope" not found. Pass the schema that holds kandev's tables with --schema.`);
  });

  it('health before installation is exit 2 with the fix', async () => {
    const r = await runCli(cli, ['health', '--schema', 'kandev'], env());
    expect(r.code).toBe(2);
    expect(r.stdout + r.stderr).toContain('Run `subagent-context up`');
  });
});

describe('--verbose and NO_COLOR', () => {
  it('--verbose adds the stack trace to the same sentence', async () => {
    const r = await runCli(cli, ['report', '--verbose', '--database-url', 'postgres://postgres@127.0.0.1:1/kandev']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^error: cannot reach the database/);
    expect(r.stderr).toMatch(/^\s+at /m);
  });

  /** Runs the CLI on a pseudo-terminal (util-linux `script`), where colour would be used. */
  const onTerminal = (env: Record<string, string | undefined>) => new Promise<string>((resolve) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
    delete childEnv.DATABASE_URL;
    execFile('script', ['-qec', `${process.execPath} ${cli} report`, '/dev/null'], { cwd: PACKAGE_ROOT, env: childEnv },
      (_err, stdout) => resolve(stdout));
  });

  it('colours errors on a terminal, and never with NO_COLOR', async () => {
    const coloured = await onTerminal({ NO_COLOR: undefined });
    expect(coloured).toContain('\x1b[31merror: no database given');
    const plain = await onTerminal({ NO_COLOR: '1' });
    expect(plain).toContain(NO_DATABASE);
    expect(plain).not.toContain('\x1b[');
  });
});

describe('exit status 3 on every error, and --version on every command', () => {
  const env = () => ({ DATABASE_URL: db.url });

  it.concurrent.each(COMMANDS)('%s --version prints the package version, exit 0', async (c) => {
    const { version } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));
    const r = await runCli(cli, [c, '--version']);
    expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('--version on its own too', async () => {
    const r = await runCli(cli, ['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it.concurrent.each(DB_COMMANDS)('%s refuses extra positional arguments instead of ignoring them', async (...args) => {
    const r = await runCli(cli, [...args, 'kandev'], env());
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe(`error: ${args[0]} takes no arguments, got "kandev". Options start with --; ` +
      `run \`subagent-context ${args[0]} --help\`.`);
  });

  it('refuses conflicting flags: metrics --once --listen', async () => {
    const r = await runCli(cli, ['metrics', '--once', '--listen', '127.0.0.1:0'], env());
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: --listen and --once cannot be combined: pick one. Run `subagent-context metrics --help`.');
  });

  it('an unknown flag on health is 3, never the "not activated" status 2', async () => {
    const r = await runCli(cli, ['health', '--jsn'], env());
    expect(r.code).toBe(3);
  });

  it('--database-url that is not a URL says what a URL looks like (not "getaddrinfo ENOTFOUND base")', async () => {
    const r = await runCli(cli, ['health', '--database-url', 'not-a-url']);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: --database-url / DATABASE_URL must be a URL like ' +
      'postgres://user:password@host:5432/database or a connection string like "host=db dbname=kandev user=kandev", got "not-a-url".');
  });

  it('a URL without a password on a SCRAM server says to add one (not "client password must be a string")', async () => {
    const u = new URL(secured.url);
    u.password = '';
    const r = await runCli(cli, ['health'], { DATABASE_URL: u.toString(), PGPASSWORD: undefined });
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe(`error: the server asks for a password and none was given (${u.toString()}): put it in the URL ` +
      '(postgres://user:password@host:5432/database) or set PGPASSWORD.');
    noStack(r.stderr);
  });

  it('a schema name with a quote is refused with one sentence; one with capitals and a hyphen installs', async () => {
    await db.query(`CREATE SCHEMA "Kandev-Prod ""x"""`);
    const quoted = await runCli(cli, ['up', '--schema', 'Kandev-Prod "x"'], env());
    expect(quoted.code).toBe(3);
    expect(quoted.stderr.trim()).toBe('error: schema names with a quote character are not supported, got "Kandev-Prod \\"x\\"": ' +
      'use a schema whose name has no \' or ".');
    await db.createHost('Kandev-Prod');
    const ok = await runCli(cli, ['up', '--schema', 'Kandev-Prod'], env());
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
  });

  it('a second up while one is installing says to wait (not "Advisory lock mode is set to \'fail\'")', async () => {
    await db.createHost('busy');
    const holder = await db.connect();
    await holder.query('SELECT pg_advisory_lock($1::bigint)', [String(PG_MIGRATE_LOCK_ID)]);
    try {
      const r = await runCli(cli, ['up', '--schema', 'busy'], env());
      expect(r.code).toBe(3);
      // An idle session holding the lock is also what a transaction pooler's server connection looks like
      // after node-pg-migrate ran through it: the sentence says how to tell, and what to do then.
      const { rows: [{ pid }] } = await holder.query('SELECT pg_backend_pid() AS pid');
      expect(r.stderr.trim()).toMatch(new RegExp('^error: another `subagent-context up` \\(or node-pg-migrate\\) is ' +
        `installing into this database right now, or pid ${pid} kept node-pg-migrate's lock after one \\(idle for [0-9:]+; .*\\), so ` +
        'this one stopped, changing nothing more: wait for it to finish and run this again, or, if nothing is installing, end that ' +
        `session first \\(SELECT pg_terminate_backend\\(${pid}\\)\\)$`));
    } finally {
      await holder.query('SELECT pg_advisory_unlock($1::bigint)', [String(PG_MIGRATE_LOCK_ID)]);
    }
  });

  describe('roles without the privilege a command needs', async () => {
    const suffix = randomBytes(3).toString('hex');
    const nocreate = `sc_nocreate_${suffix}`;
    const stranger = `sc_stranger_${suffix}`;
    await db.query(`CREATE ROLE ${nocreate} LOGIN; CREATE ROLE ${stranger} LOGIN`);
    await db.createHost('owned');
    await db.query(`GRANT USAGE ON SCHEMA owned TO ${nocreate}, ${stranger}; GRANT CREATE ON SCHEMA owned TO ${stranger};
                    GRANT SELECT, INSERT, UPDATE, DELETE, TRIGGER, REFERENCES ON ALL TABLES IN SCHEMA owned TO ${nocreate}, ${stranger}`);
    afterAll(async () => {
      await db.query(`DROP OWNED BY ${nocreate}, ${stranger}; DROP ROLE ${nocreate}; DROP ROLE ${stranger}`);
    });
    const as = (role: string) => { const u = new URL(db.url); u.username = role; u.password = ''; return u.toString(); };

    const owner = decodeURIComponent(new URL(db.url).username) || 'postgres';
    const notOwner = (role: string, command: string, what: string, table: string, why: string) => `error: the role ${role} ` +
      `does not own ${what} in schema "owned" (${table} belongs to ${owner}): run \`subagent-context ${command}\` as ${owner} ` +
      `or a role that is a member of it, because ${why}; no GRANT to another role replaces that (docs/security.md).`;
    const UP = 'it creates and replaces the installation\'s tables, functions and trigger';

    // Before an installation, up needs to own kandev's messages table (its trigger and index): CREATE on the
    // schema alone, which the sentence used to ask for, would only move the refusal.
    it('up before any installation as a role that does not own task_session_messages: whom to run it as, no stack', async () => {
      const r = await runCli(cli, ['up', '--schema', 'owned'], { DATABASE_URL: as(nocreate) });
      expect(r.code).toBe(3);
      expect(r.stderr.trim()).toBe(notOwner(nocreate, 'up', 'kandev\'s task_session_messages', 'task_session_messages', UP));
      noStack(r.stderr);
    });

    // On 4259581 a role that may read the bookkeeping table (GRANT SELECT ON ALL TABLES, as a dashboard role
    // often gets) got node-pg-migrate's raw stack: "Unable to ensure migrations table: error: must be owner of
    // table subagent_context_migrations", and an uninstall as a role with more grants removed the activation
    // keys before it was refused.
    it('up and uninstall as a role that does not own the installation: one sentence, nothing changed', async () => {
      expect((await runCli(cli, ['up', '--schema', 'owned'], env())).code).toBe(0);
      const keys = async () => (await db.query('SELECT key, value FROM owned.kandev_meta ORDER BY key')).rows;
      const before = await keys();
      for (const grant of ['', `GRANT SELECT ON owned.subagent_context_migrations TO ${stranger}`,
        `GRANT ALL ON ALL TABLES IN SCHEMA owned TO ${stranger}`]) {
        if (grant) await db.query(grant);
        const up = await runCli(cli, ['up', '--schema', 'owned'], { DATABASE_URL: as(stranger) });
        expect([up.code, up.stdout, up.stderr.trim()]).toEqual([3, '', notOwner(stranger, 'up', 'the installation',
          'subagent_context_migrations', UP)]);
        const uninstall = await runCli(cli, ['uninstall', '--schema', 'owned'], { DATABASE_URL: as(stranger) });
        expect([uninstall.code, uninstall.stdout, uninstall.stderr.trim()]).toEqual([3, '', notOwner(stranger, 'uninstall',
          'the installation', 'subagent_context_migrations', 'it drops the installation\'s trigger, functions and counters')]);
        expect(await keys()).toEqual(before);
      }
      await db.query(`REVOKE ALL ON ALL TABLES IN SCHEMA owned FROM ${stranger};
                      GRANT SELECT, INSERT, UPDATE, DELETE, TRIGGER, REFERENCES ON ALL TABLES IN SCHEMA owned TO ${stranger}`);
    }, 240_000);  // seven runs of the CLI

    it('report as a role that cannot read the table names every grant it needs, in --schema', async () => {
      const r = await runCli(cli, ['report', '--schema', 'owned'], { DATABASE_URL: as(nocreate) });
      expect(r.code).toBe(3);
      // The GRANT names the schema: a bare table name would grant on (or miss in) the search_path's schema.
      expect(r.stderr.trim()).toBe(`error: the role ${nocreate} may not use owned.task_session_subagents: \`subagent-context ` +
        `report\` needs SELECT on owned.task_session_subagents, owned.task_sessions, owned.tasks; grant it with ` +
        `\`GRANT SELECT ON owned.task_session_subagents, owned.task_sessions, owned.tasks TO ${nocreate};\` ` +
        '(docs/security.md), or run it as the installing role.');
    });

    it('repair as another role says to run it as the installing role, whatever it was granted (no GRANT loop)', async () => {
      const expected = (object: string) => `error: the role ${nocreate} may not use owned.${object}: \`subagent-context repair\` ` +
        'must run as the role that installed subagent-context (the owner of owned.task_session_subagents), because it writes ' +
        'the missing rows into task_session_subagents with the rights of the role that runs it; no GRANT to another role replaces that.';
      const first = await runCli(cli, ['repair', '--schema', 'owned'], { DATABASE_URL: as(nocreate) });
      expect(first.code).toBe(3);
      expect(first.stderr.trim()).toMatch(/^error: .*must run as the role that installed subagent-context/);
      // Granting what the old message asked for, table by table, only moves the refusal; the advice stays the same.
      await db.query(`GRANT SELECT ON owned.kandev_meta, owned.task_session_subagents TO ${nocreate}`);
      const second = await runCli(cli, ['repair', '--schema', 'owned'], { DATABASE_URL: as(nocreate) });
      expect(second.code).toBe(3);
      expect(second.stderr.trim()).toBe(expected('subagent_context_reconcile'));  // repair compares first
      const installer = await runCli(cli, ['repair', '--schema', 'owned'], env());
      expect(installer.code, installer.stderr).toBe(0);
    });
  });
});

describe('a multi-line error on the terminal', () => {
  it("keeps a line's leading tab as its indentation (libpq's \"\\n\\tIs the server running\"), and escapes every other control character", () => {
    const message = 'connection to server at "db" (10.0.0.1), port 5432 failed: Connection refused\n' +
      '\tIs the server running on that host and accepting TCP/IP connections?\tok\x1b[2J';
    expect(safeLines(message)).toBe('connection to server at "db" (10.0.0.1), port 5432 failed: Connection refused\n' +
      '  Is the server running on that host and accepting TCP/IP connections?\\tok\\x1b[2J');
    expect(safeLines('\t\tdeep\n\x1b]0;title\x07')).toBe('    deep\n\\x1b]0;title\\x07');
  });
});
