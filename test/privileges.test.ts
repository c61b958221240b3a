// docs/security.md's dashboard role, created exactly as the doc says (the role's name made unique: roles
// are shared by every database of the server), runs what the doc says it can: health, report and
// metrics --once; and what it cannot do is refused in one sentence that names the real need.
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from './helpers/database.js';
import { builtCli, runCli } from './helpers/cli.js';
import { blocksUnder } from './helpers/doc-blocks.js';

const cli = builtCli();
const db = await freshDatabase('privileges', { from: 'installed' });
const role = `kandev_dashboard_${randomBytes(3).toString('hex')}`;
afterAll(async () => {
  await db.query(`DROP OWNED BY ${role}`).catch(() => {});
  await db.query(`DROP ROLE IF EXISTS ${role}`);
});

describe("docs/security.md's dashboard role", () => {
  const [block] = blocksUnder('security.md', 'A dashboard role');
  const url = () => { const u = new URL(db.url); u.username = role; u.password = 'change-me'; return u.toString(); };

  it('is created by the documented SQL', async () => {
    expect(block!.lang).toBe('sql');
    // psql reads the block on stdin, as pasted into a psql session.
    execFileSync('psql', [db.url, '-q', '-v', 'ON_ERROR_STOP=1'], { input: block!.text.replaceAll('kandev_dashboard', role) });
    const { rows } = await db.query('SELECT rolcanlogin FROM pg_roles WHERE rolname = $1', [role]);
    expect(rows).toEqual([{ rolcanlogin: true }]);
  });

  it.each([['health'], ['report'], ['metrics', '--once']])('runs %s', async (...args) => {
    const r = await runCli(cli, args, { DATABASE_URL: url() });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(0);
  });

  it('is refused repair with the real need, once', async () => {
    const r = await runCli(cli, ['repair'], { DATABASE_URL: url() });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^error: the role kandev_dashboard_\w+ may not use \w+: `subagent-context repair` must run as the role that installed subagent-context/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
