// docs/security.md's dashboard role, created exactly as the doc says (the role's name made unique: roles
// are shared by every database of the server), runs what the doc says it can: health, report and
// metrics --once; and what it cannot do is refused in one sentence that names the real need.
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { blocksUnder } from '../helpers/doc-blocks.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

const cli = builtCli();
const db = await freshDatabase('privileges', { from: 'installed' });
const role = `kandev_dashboard_${randomBytes(3).toString('hex')}`;
const usageOnly = `sc_usage_${randomBytes(3).toString('hex')}`;
afterAll(async () => {
  for (const r of [role, usageOnly]) {
    await db.query(`DROP OWNED BY ${r}`).catch(() => {});
    await db.query(`DROP ROLE IF EXISTS ${r}`);
  }
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

// docs/security.md: health and the exporter need USAGE on the schema and nothing more (the newest subagent
// message's time comes from a reader function); health --full also runs the reconciliation. On 4259581 the doc
// said the exporter needed SELECT on task_session_messages, and health --full as such a role printed
// "may not use subagent_context_reconcile" with no GRANT.
describe('a role with USAGE on the schema and nothing else', () => {
  const url = () => { const u = new URL(db.url); u.username = usageOnly; u.password = ''; return u.toString(); };

  it('scrapes up 1 with the verdict, no permission denied; health answers', async () => {
    await db.query(`CREATE ROLE ${usageOnly} LOGIN; REVOKE USAGE ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO ${usageOnly}`);
    const m = await runCli(cli, ['metrics', '--once'], { DATABASE_URL: url() });
    expect(m.code).toBe(0);
    // What it may not do is keep the reconciliation current: said once, with the GRANT, in the exporter's log.
    expect(m.stderr).toBe('after evaluation: this role may not advance the reconciliation, so health reads what was written ' +
      'since the last one another role completed; to let the exporter keep it current: GRANT EXECUTE ON FUNCTION ' +
      '"public".subagent_context_reconcile(timestamp) TO <this role> (docs/security.md#a-dashboard-role). Not tried again.\n');
    expect(m.stdout).toContain('subagent_context_up{schema="public"} 1\n');
    expect(m.stdout).toContain('subagent_context_permission_denied{schema="public"} 0\n');
    expect(m.stdout).toMatch(/subagent_context_status\{schema="public",status="(healthy|idle)"\} 1\n/);
    const h = await runCli(cli, ['health', '--json'], { DATABASE_URL: url() });
    expect([h.code, h.stderr]).toEqual([0, '']);
  });

  it('health --full names the GRANT it needs, and runs once it is given', async () => {
    const grant = `GRANT EXECUTE ON FUNCTION public.subagent_context_reconcile(timestamp) TO ${usageOnly};`;
    const refused = await runCli(cli, ['health', '--full'], { DATABASE_URL: url() });
    expect([refused.code, refused.stdout, refused.stderr]).toEqual([3, '', `error: the role ${usageOnly} may not use ` +
      'subagent_context_reconcile: `subagent-context health --full` runs the reconciliation, so it needs EXECUTE on it; ' +
      `grant it with \`${grant}\` (docs/security.md#a-dashboard-role), or run it as the installing role.\n`]);
    await db.query(grant);
    const granted = await runCli(cli, ['health', '--full'], { DATABASE_URL: url() });
    expect([granted.code, granted.stderr]).toEqual([0, '']);
  });

  it('docs/security.md says the exporter needs USAGE only, not SELECT on task_session_messages', () => {
    const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'security.md'), 'utf8');
    expect(doc).not.toMatch(/exporter connects as needs USAGE on the schema and SELECT/);
    expect(doc).toContain('The role the exporter connects as needs USAGE on the schema and nothing more');
  });
});
