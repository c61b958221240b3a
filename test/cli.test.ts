// CLI hygiene, through the built command as an operator runs it: --help with examples on every command,
// and every error an operator can hit as one sentence that says what to do, a non-zero exit, no stack
// trace unless --verbose, no colour with NO_COLOR.
import { describe, it, expect, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { freshDatabase } from './helpers/database.js';
import { builtCli, runCli } from './helpers/cli.js';
import { startEmbeddedPostgres } from '../demo/embedded.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const cli = builtCli();
const db = await freshDatabase('cli');
await db.createHost('kandev');          // host tables, nothing installed
await db.query('CREATE SCHEMA bare');   // not even host tables
// A server with password authentication, for the wrong-password error (the embedded server uses scram).
const secured = await startEmbeddedPostgres();
afterAll(() => secured.stop());

const COMMANDS = ['up', 'backfill', 'health', 'repair', 'report', 'metrics', 'uninstall', 'demo'];
const DB_COMMANDS: string[][] = [['up'], ['backfill'], ['health'], ['repair'], ['report'], ['metrics', '--once'], ['uninstall']];
const noStack = (s: string) => expect(s, 'no stack trace').not.toMatch(/^\s+at /m);

describe('help', () => {
  it('lists every command; no command at all is a usage error', async () => {
    const help = await runCli(cli, ['--help']);
    expect(help.code).toBe(0);
    for (const c of COMMANDS) expect(help.stdout).toMatch(new RegExp(`^  ${c} +\\S`, 'm'));
    const none = await runCli(cli, []);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe(help.stdout);
  });

  it.each(COMMANDS)('%s --help shows usage and at least one example, exit 0', async (c) => {
    const r = await runCli(cli, [c, '--help']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(new RegExp(`^subagent-context ${c}\\b`));
    expect(r.stdout).toMatch(/^Examples?:\n( {2}.+\n?)+/m);
    expect(r.stdout).toContain(c === 'demo' ? 'npm start' : `subagent-context ${c}`);
  });

  it('an unknown command or option is one sentence pointing at --help, exit 2', async () => {
    const cmd = await runCli(cli, ['fanout']);
    expect(cmd.code).toBe(2);
    expect(cmd.stderr.trim()).toBe('error: unknown command "fanout". Run `subagent-context --help` for the list.');
    const opt = await runCli(cli, ['report', '--colour']);
    expect(opt.code).toBe(2);
    expect(opt.stderr.trim()).toMatch(/^error: Unknown option '--colour'.*Run `subagent-context report --help`\.$/);
  });
});

describe('connection errors, for every command that needs a database', () => {
  it.each(DB_COMMANDS)('%s: no database, unreachable, wrong password, missing database', async (...args) => {
    const none = await runCli(cli, args);
    expect(none.code).toBe(1);
    expect(none.stderr.trim()).toBe('error: no database given: pass --database-url URL or set DATABASE_URL.');

    const unreachable = await runCli(cli, [...args, '--database-url', 'postgres://postgres@127.0.0.1:1/kandev']);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr.trim()).toBe('error: cannot reach the database (postgres://postgres@127.0.0.1:1/kandev): ' +
      'connect ECONNREFUSED 127.0.0.1:1. Check --database-url / DATABASE_URL and that the server is running.');
    noStack(unreachable.stderr);

    const u = new URL(secured.url);
    u.password = 'not-the-password';
    const refused = await runCli(cli, args, { DATABASE_URL: u.toString() });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(`error: the database refused the login (postgres://postgres:***@${u.host}/postgres): ` +
      'password authentication failed for user "postgres". Check the user and password in --database-url.');
    expect(refused.stderr).not.toContain('not-the-password');

    const u2 = new URL(db.url);
    u2.pathname = '/no_such_database';
    const missing = await runCli(cli, [...args, '--database-url', u2.toString()]);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toMatch(/^error: database "no_such_database" does not exist \(.*\)\. Create the database or fix the name in --database-url\.$/);
  });
});

describe('errors about the target schema', () => {
  const env = () => ({ DATABASE_URL: db.url });

  it("up: kandev's tables missing, and a schema that does not exist", async () => {
    const bare = await runCli(cli, ['up', '--schema', 'bare'], env());
    expect(bare.code).toBe(1);
    expect(bare.stderr.trim()).toBe(`error: subagent-context: kandev's host tables are missing in schema "bare": ` +
      `kandev_meta, task_sessions, task_session_messages. Install into the schema that holds kandev's tables (--schema).`);
    for (const c of [['up'], ['report'], ['metrics', '--once']]) {
      const r = await runCli(cli, [...c, '--schema', 'nope'], env());
      expect(r.code, c.join(' ')).toBe(1);
      expect(r.stderr.trim()).toBe(`error: schema "nope" not found. Pass the schema that holds kandev's tables with --schema.`);
    }
  });

  it.each([
    [['backfill'], 'function kandev.subagent_context_backfill() does not exist'],
    [['repair'], 'function kandev.subagent_context_repair() does not exist'],
    [['report'], 'relation "kandev.task_session_subagents" does not exist'],
    [['metrics', '--once'], 'function kandev.subagent_context_health() does not exist'],
  ])('%s before installation says to run up', async (args, what) => {
    const r = await runCli(cli, [...args, '--schema', 'kandev'], env());
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`error: ${what}: subagent-context does not look installed in this schema. Run \`subagent-context up\` first.`);
    noStack(r.stderr);
  });

  it('health on a schema that does not exist says so, exit 2 (never the shortfall status 1)', async () => {
    const r = await runCli(cli, ['health', '--schema', 'nope'], env());
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`error: schema "nope" not found. Pass the schema that holds kandev's tables with --schema.`);
  });

  it('uninstall where nothing is installed says so and changes nothing; a missing schema is an error', async () => {
    const r = await runCli(cli, ['uninstall', '--schema', 'kandev'], env());
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('nothing to uninstall: subagent-context is not installed in schema "kandev"');
    const gone = await runCli(cli, ['uninstall', '--schema', 'nope'], env());
    expect(gone.code).toBe(1);
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
    expect(r.code).toBe(1);
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
    expect(plain).toContain('error: no database given: pass --database-url URL or set DATABASE_URL.');
    expect(plain).not.toContain('\x1b[');
  });
});
