// kandev_meta belongs to kandev's application role, and so do the triggers and rules it puts there: when a
// superuser installs, writing or deleting the activation keys would run that code as the superuser. `up`,
// `backfill` and `uninstall` refuse instead, in one sentence, and change nothing (docs/security.md#kandev_meta).
//
// On 4259581 the trigger below ran as the superuser on `up` and on `uninstall` and made the role SUPERUSER.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli, type CliResult } from '../helpers/cli.js';
import { dropHostRole, hostRoleOwningPublic } from '../helpers/host-role.js';

const db = await freshDatabase('kandev_meta_code', { from: 'host' });
const cli = builtCli();
const env = { DATABASE_URL: db.url };
let admin: pg.Client;
let app: string;

beforeAll(async () => {
  admin = await db.connect();
  await admin.query('SET search_path = pg_catalog, pg_temp');
  app = await hostRoleOwningPublic(admin);
  // What the role puts on its table: a trigger whose function counts its runs (nextval survives a rollback)
  // and, run by a superuser, makes the role one; and a rule that does the same on DELETE.
  await admin.query(`SET ROLE ${app}`);
  await admin.query(`CREATE SEQUENCE public.meta_code_runs`);
  await admin.query(`GRANT USAGE ON SEQUENCE public.meta_code_runs TO PUBLIC`);
  await admin.query(`CREATE FUNCTION public.meta_audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM nextval('public.meta_code_runs');
      IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN EXECUTE 'ALTER ROLE ${app} SUPERUSER'; END IF;
      RETURN coalesce(NEW, OLD);
    END $$`);
  await admin.query(`CREATE FUNCTION public.meta_rule_ran() RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN PERFORM nextval('public.meta_code_runs'); RETURN true; END $$`);
  await admin.query('RESET ROLE');
}, 120_000);

afterAll(async () => {
  await dropHostRole(admin, app);
});

/** As the application role, on its own table. */
async function asApp(sql: string) {
  await admin.query(`SET ROLE ${app}`);
  try { await admin.query(sql); } finally { await admin.query('RESET ROLE'); }
}

async function state() {
  const { rows: [s] } = await admin.query(`SELECT
      (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.meta_code_runs)::int AS code_ran,
      (SELECT rolsuper FROM pg_roles WHERE rolname = $1) AS superuser,
      ARRAY(SELECT key FROM public.kandev_meta WHERE key LIKE 'subagent\\_context\\_%' ORDER BY key) AS keys,
      to_regclass('public.task_session_subagents') IS NOT NULL AS table_installed,
      EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'subagent_context_capture') AS capture_installed`, [app]);
  return s as { code_ran: number; superuser: boolean; keys: string[]; table_installed: boolean; capture_installed: boolean };
}

/** One sentence naming what is on kandev_meta and what to do, exit 3. */
function expectRefusal(r: CliResult, what: RegExp) {
  expect(r.code, r.stderr + r.stdout).toBe(3);
  const lines = r.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^error: public\\.kandev_meta carries code that its owner ${app} controls \\(.*${what.source}.*\\), ` +
    `which would run with the privileges of postgres, who is not its owner, .*so nothing was changed: drop or disable it, or run this as ${app} \\(docs/security\\.md#kandev_meta\\)$`));
}

describe('code the application role put on its kandev_meta', () => {
  it('up: refused before anything is installed; the trigger never ran', async () => {
    await asApp(`CREATE TRIGGER meta_audit BEFORE INSERT OR UPDATE OR DELETE ON public.kandev_meta FOR EACH ROW EXECUTE FUNCTION public.meta_audit()`);
    const before = await state();
    expectRefusal(await runCli(cli, ['up'], env), /trigger meta_audit on public\.kandev_meta/);
    expect(await state()).toEqual({ ...before, table_installed: false, capture_installed: false });
    expect(before).toMatchObject({ code_ran: 0, superuser: false, keys: [] });
  }, 300_000);

  it('with the trigger disabled, up installs and activates; ENABLE ALWAYS again: uninstall refuses and keeps everything', async () => {
    await asApp('ALTER TABLE public.kandev_meta DISABLE TRIGGER meta_audit');
    const up = await runCli(cli, ['up'], env);
    expect(up.code, up.stderr).toBe(0);
    await asApp('ALTER TABLE public.kandev_meta ENABLE ALWAYS TRIGGER meta_audit');
    const before = await state();
    expect(before).toMatchObject({ code_ran: 0, superuser: false, table_installed: true, capture_installed: true,
      keys: ['subagent_context_backfill_through', 'subagent_context_capture_since'] });
    expectRefusal(await runCli(cli, ['uninstall'], env), /trigger meta_audit on public\.kandev_meta/);
    expect(await state()).toEqual(before);
  }, 300_000);

  it('backfill, with the keys gone: refused, no key written; a rule is refused the same way', async () => {
    await asApp('ALTER TABLE public.kandev_meta DISABLE TRIGGER meta_audit');
    await asApp(`DELETE FROM public.kandev_meta WHERE key LIKE 'subagent\\_context\\_%'`);
    await asApp('ALTER TABLE public.kandev_meta ENABLE ALWAYS TRIGGER meta_audit');
    const before = await state();
    expectRefusal(await runCli(cli, ['backfill'], env), /trigger meta_audit on public\.kandev_meta/);
    expect(await state()).toEqual(before);

    await asApp('ALTER TABLE public.kandev_meta DISABLE TRIGGER meta_audit');
    await asApp(`CREATE RULE meta_rule AS ON INSERT TO public.kandev_meta WHERE public.meta_rule_ran() DO ALSO NOTHING`);
    expectRefusal(await runCli(cli, ['backfill'], env), /rule meta_rule on public\.kandev_meta/);
    expect(await state()).toEqual(before);
    expect(before).toMatchObject({ code_ran: 0, superuser: false, keys: [] });
  }, 300_000);

  it('with neither enabled, backfill and uninstall work as before', async () => {
    await asApp('DROP RULE meta_rule ON public.kandev_meta');
    const backfill = await runCli(cli, ['backfill'], env);
    expect(backfill.code, backfill.stderr).toBe(0);
    const uninstall = await runCli(cli, ['uninstall'], env);
    expect(uninstall.code, uninstall.stderr).toBe(0);
    expect(await state()).toMatchObject({ code_ran: 0, superuser: false, keys: [], capture_installed: false });
  }, 300_000);
});
