// A password given on the command line (--database-url) is masked in the process title, which every user
// of the machine reads (`ps`, /proc/<pid>/cmdline): on a running `metrics --listen`, in both spellings of
// the option, and when the masked title is longer than the command line Linux keeps room for (cut, never shown).
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, startCli, exporterUrl } from '../helpers/cli.js';

const db = await freshDatabase('process_title', { from: 'installed' });
const cli = builtCli();
// A dashboard role (USAGE on the schema is all metrics needs). Every test server trusts it on loopback,
// the embedded one included (which asks `postgres` for its password), so any password logs it in.
const role = `sc_title_${randomBytes(3).toString('hex')}`;
await db.query(`CREATE ROLE ${role} LOGIN; GRANT USAGE ON SCHEMA public TO ${role}`);
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await db.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
});

/** The role's URL, with `password` in it when given. */
function withPassword(password: string, query = ''): string {
  const u = new URL(db.url);
  u.username = role;
  u.password = password;
  return u.toString() + query;
}

async function running(args: string[]) {
  const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', ...args], { DATABASE_URL: undefined }, exporterUrl, children);
  const pid = started.child.pid!;
  return {
    ps: execFileSync('ps', ['-ww', '-o', 'args=', '-p', String(pid)], { encoding: 'utf8' }).trim(),
    cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8'),
    url: started.value,
    stop: () => started.child.kill('SIGTERM'),
  };
}

describe('the process title', () => {
  it('--database-url URL: ps shows the command with the password as ***, and the exporter still logs in with it', async () => {
    const url = withPassword('Qx7title-secret');
    const p = await running(['--database-url', url]);
    const masked = url.replace('Qx7title-secret', '***');
    expect(p.ps).toBe(`${process.execPath} ${cli} metrics --listen 127.0.0.1:0 --database-url ${masked}`);
    expect(p.cmdline).not.toContain('Qx7title-secret');
    expect(p.cmdline).toContain(`--database-url ${masked}`);
    expect(await (await fetch(p.url)).text()).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
    p.stop();
  });

  it('--database-url=URL, a password shorter than its mask and a long URL: the title is cut at its end, the password never shown', async () => {
    const query = `?application_name=${'x'.repeat(20_000)}`;
    const url = withPassword('Q7', query);
    const p = await running([`--database-url=${url}`]);
    const original = [process.execPath, cli, 'metrics', '--listen', '127.0.0.1:0', `--database-url=${url}`].join(' ');
    const masked = original.replace(':Q7@', ':***@');
    // Linux keeps the room the command line had: the title is the masked one, cut to that length.
    expect(p.cmdline.replace(/\0+$/, '')).toBe(masked.slice(0, original.length));
    expect(p.ps).not.toContain(':Q7@');
    expect(p.ps).toContain(':***@');
    p.stop();
  });

  it('a command line without a password is left as it was', async () => {
    const url = withPassword('');
    const p = await running(['--database-url', url]);
    expect(p.cmdline.split('\0').slice(0, -1)).toEqual([process.execPath, cli, 'metrics', '--listen', '127.0.0.1:0', '--database-url', url]);
    expect(await (await fetch(p.url)).text()).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
    p.stop();
  });
});
