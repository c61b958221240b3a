// The exporter as a role that may log in but not use the installation's schema (docs/security.md, "A
// dashboard role": metrics needs USAGE and nothing else): the scrape error names the GRANT to run, as
// `report`'s does, `subagent_context_permission_denied` says "connected but not permitted", and the shipped
// rules fire SubagentContextPermissionDenied for it, not SubagentContextDatabaseUnreachable (promtool, on
// the real scrape).
import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, exporterUrl, runCli, startCli } from '../helpers/cli.js';
import { firingAlerts, PROMTOOL } from '../helpers/alert-rules.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const cli = builtCli();
const db = await freshDatabase('exporter_privileges', { from: 'installed' });
const role = `sc_exporter_${randomBytes(3).toString('hex')}`;
// PostgreSQL 15 lets PUBLIC use the public schema: this database takes that back, as a locked-down one does.
await db.query(`CREATE ROLE ${role} LOGIN; REVOKE USAGE ON SCHEMA public FROM PUBLIC`);
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await db.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
});
const asRole = () => { const u = new URL(db.url); u.username = role; u.password = ''; return u.toString(); };
const GRANT = `the role ${role} may not use schema public: \`subagent-context metrics\` needs USAGE on it; ` +
  `grant it with \`GRANT USAGE ON SCHEMA public TO ${role};\` (docs/security.md#a-dashboard-role), or run it as the installing role.`;

describe('the exporter as a role without USAGE on the schema', () => {
  let scrape = '';

  it('metrics --once: the scrape error names the GRANT, permission_denied 1, exit 3 with the same sentence', async () => {
    const r = await runCli(cli, ['metrics', '--once'], { DATABASE_URL: asRole() });
    expect(r.code).toBe(3);
    scrape = r.stdout;
    // Refused is not slow (subagent_context_slow 0); the evaluation's timings are beside it, left out below.
    expect(r.stdout).toMatch(/^subagent_context_slow\{schema="public"\} 0$/m);
    const timings = /^# (HELP|TYPE) subagent_context_(slow|evaluation_seconds|evaluation_age_seconds) .*\n|^subagent_context_(slow|evaluation_seconds|evaluation_age_seconds)\{.*\n/gm;
    expect(r.stdout.replace(timings, '')).toBe(`# scrape error: ${GRANT}\n` +
      '# HELP subagent_context_up 1 when the database answered this scrape and what is installed could be read (nothing installed counts), else 0.\n' +
      '# TYPE subagent_context_up gauge\nsubagent_context_up{schema="public"} 0\n' +
      '# HELP subagent_context_permission_denied 1 when the database answered but refused the exporter\'s role a privilege it needs ' +
      '(the scrape error names the GRANT), 0 when the scrape could read; absent when the database could not be asked.\n' +
      '# TYPE subagent_context_permission_denied gauge\nsubagent_context_permission_denied{schema="public"} 1\n');
    expect(r.stderr).toBe(`error: ${GRANT}\n`);
  });

  it('metrics --listen: the outage is logged with the GRANT too', async () => {
    const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0'], { DATABASE_URL: asRole() }, exporterUrl, children);
    const body = await (await fetch(started.value)).text();
    expect(body.split('\n')[0]).toBe(`# scrape error: ${GRANT}`);
    started.child.kill('SIGTERM');
    await started.exited;
    expect(started.stderr()).toBe(`scrape error (subagent_context_up 0): ${GRANT}\n`);
  });

  it.skipIf(!PROMTOOL)('the shipped rules fire SubagentContextPermissionDenied on that scrape, not DatabaseUnreachable', () => {
    expect(firingAlerts(join(PACKAGE_ROOT, 'alerts', 'subagent-context.rules.yml'), scrape)).toEqual(['SubagentContextPermissionDenied']);
  });

  it('once granted, permission_denied is 0 and nothing fires', async () => {
    // As docs/security.md grants a dashboard role: USAGE, and the step that keeps the reconciliation current.
    await db.query(`GRANT USAGE ON SCHEMA public TO ${role}; GRANT EXECUTE ON FUNCTION public.subagent_context_reconcile(timestamp) TO ${role}`);
    const r = await runCli(cli, ['metrics', '--once'], { DATABASE_URL: asRole() });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^subagent_context_permission_denied\{schema="public"\} 0$/m);
    if (PROMTOOL) expect(firingAlerts(join(PACKAGE_ROOT, 'alerts', 'subagent-context.rules.yml'), r.stdout)).toEqual([]);
  });
});
