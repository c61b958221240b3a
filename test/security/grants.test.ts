// Who may call what (docs/security.md#who-may-call-what), role by role: the installing role (not a
// superuser: it owns kandev's schema) may execute every function of the installation; kandev's application
// role, docs/security.md's dashboard role (created by the doc's own SQL) and a role with USAGE on the
// schema only may execute the readers that the doc lists, which return counts, timestamps and versions, and
// are refused everything else, above all what returns (session, tool call) ids or writes. Sizes are not the
// caller's: a batch size out of bounds is refused in one sentence. On 8c1724b PUBLIC could execute every
// function, subagent_context_discrepancies() and subagent_context_reconcile(max_messages, min_age) included.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../helpers/database.js';
import { blocksUnder, readDoc } from '../helpers/doc-blocks.js';
import { createHostTables, createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { builtCli, runCli } from '../helpers/cli.js';

const cli = builtCli();
const db = await freshDatabase('grants');
const suffix = randomBytes(3).toString('hex');
const roles = {
  installer: `sc_installer_${suffix}`,
  application: `sc_application_${suffix}`,
  dashboard: `kandev_dashboard_${suffix}`,
  usage: `sc_usage_${suffix}`,
};
const clients: pg.Client[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => {})));
  const admin = new pg.Client(inject('adminUrl'));
  await admin.connect();
  try {
    for (const role of Object.values(roles)) await db.query(`DROP OWNED BY ${role} CASCADE`).catch(() => {});
    for (const role of Object.values(roles)) await admin.query(`DROP ROLE IF EXISTS ${role}`);
  } finally {
    await admin.end();
  }
});

const urlOf = (role: string) => { const u = new URL(db.url); u.username = role; u.password = 'change-me'; return u.toString(); };
async function connectAs(role: string) {
  const c = new pg.Client(urlOf(role));
  c.on('error', () => {});
  await c.connect();
  clients.push(c);
  return c;
}

let installer: pg.Client;
let t: Awaited<ReturnType<typeof createTurn>>;
let functions: Array<{ signature: string; call: string; trigger: boolean }>;

// In a hook, so that the roles are dropped whatever fails here.
beforeAll(async () => {
  // The installing role owns kandev's schema (public here, so that the doc's SQL runs as written) and its
  // tables, and creates roles; `up` runs as it.
  await db.query(`CREATE ROLE ${roles.installer} LOGIN CREATEROLE PASSWORD 'change-me'`);
  await db.query(`ALTER SCHEMA public OWNER TO ${roles.installer}; GRANT CREATE ON DATABASE "${db.name}" TO ${roles.installer}`);
  installer = await connectAs(roles.installer);
  await createHostTables(installer, 'public');
  const up = await runCli(cli, ['up'], { DATABASE_URL: urlOf(roles.installer) });
  expect(up.code, up.stderr).toBe(0);
  t = await createTurn(installer, 'public', 'grants', '2099-01-01 00:00:00');
  // One subagent written uncaptured (a bulk load in replica role): there is a missing key to read.
  const loader = await db.connect();
  await loader.query('SET session_replication_role = replica');
  await insertMessage(loader, 'public', { id: 'm1', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:01',
    metadata: subagentMetadata({ tool_call_id: 'toolu_1', status: 'pending', subagent: {} }) });

  // kandev's application role, as test/security/security.test.ts makes one; a role with USAGE on the schema only.
  await installer.query(`CREATE ROLE ${roles.application} LOGIN PASSWORD 'change-me'`);
  await installer.query(`GRANT USAGE ON SCHEMA public TO ${roles.application}`);
  await installer.query(`GRANT SELECT, INSERT, UPDATE ON kandev_meta, tasks, task_sessions, task_session_turns, task_session_messages TO ${roles.application}`);
  await installer.query(`CREATE ROLE ${roles.usage} LOGIN PASSWORD 'change-me'`);
  await installer.query(`GRANT USAGE ON SCHEMA public TO ${roles.usage}`);
  // docs/security.md's dashboard role, by the doc's SQL as the installing role runs it in psql.
  const [block] = blocksUnder('security.md', 'A dashboard role');
  execFileSync('psql', [urlOf(roles.installer), '-q', '-v', 'ON_ERROR_STOP=1'], { input: block!.text.replaceAll('kandev_dashboard', roles.dashboard) });

  // Every function and procedure of the installation, with a call that passes NULLs.
  functions = (await db.query<{ signature: string; call: string; trigger: boolean }>(`
    SELECT p.oid::regprocedure::text AS signature, p.prorettype = 'trigger'::regtype AS trigger,
           CASE WHEN p.prokind = 'p' THEN 'CALL ' ELSE 'SELECT ' END || p.oid::regproc::text || '(' ||
           coalesce((SELECT string_agg('NULL::' || format_type(a.t, NULL), ', ' ORDER BY a.n)
                       FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, n)), '') || ')' AS call
      FROM public.subagent_context_ours() AS o JOIN pg_proc AS p ON p.oid = o.oid  -- sql/data/ours.sql's rule
     ORDER BY 1`)).rows;
}, 120_000);

/** The readers docs/security.md lists under "Who may call what", as regprocedure text. */
function documented() {
  const section = readDoc('security.md').split(/^## Who may call what$/m)[1]?.split(/^## /m)[0] ?? '';
  return [...section.matchAll(/^\| (`.*?`) \|/gm)].flatMap(([, cell]) => [...cell!.matchAll(/`(subagent_context_\w+)\(([^)]*)\)`/g)])
    .map(([, name, args]) => `${name}(${args})`).sort();
}

/** What `role` may execute (has_function_privilege), and the ones it may not. */
async function executable(role: string) {
  const { rows } = await db.query<{ signature: string; may: boolean }>(
    `SELECT s AS signature, has_function_privilege($1, s::regprocedure, 'EXECUTE') AS may FROM unnest($2::text[]) AS s ORDER BY 1`,
    [role, functions.map((f) => f.signature)]);
  return { may: rows.filter((r) => r.may).map((r) => r.signature), mayNot: rows.filter((r) => !r.may).map((r) => r.signature) };
}

/** Calls `call` as `c`: 'ok', or the SQLSTATE and message of the refusal. */
async function attempt(c: pg.Client, call: string) {
  await c.query('BEGIN');
  try {
    await c.query(call);
    return 'ok';
  } catch (err) {
    const e = err as { code?: string; message: string };
    return `${e.code}: ${e.message}`;
  } finally {
    await c.query('ROLLBACK');
  }
}

const READERS = ['subagent_context_health()', 'subagent_context_installation()', 'subagent_context_last_message_at()',
  'subagent_context_parse_key(text)', 'subagent_context_stats()', 'subagent_context_topology()', 'subagent_context_trigger_state()'];

describe('who may call what, role by role', () => {
  it('PUBLIC may execute exactly the readers, and docs/security.md lists exactly those', async () => {
    expect(documented()).toEqual(READERS);
    const { rows } = await db.query(`
      SELECT p.oid::regprocedure::text AS signature FROM pg_proc AS p
       CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a
       WHERE p.oid::regprocedure::text = ANY ($1) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE' ORDER BY 1`,
      [functions.map((f) => f.signature)]);
    expect(rows.map((r) => r.signature)).toEqual(READERS);
    expect(functions.length).toBeGreaterThan(40);
    // The ones the issue named are among those enumerated.
    for (const f of ['subagent_context_missing()', 'subagent_context_discrepancies()', 'subagent_context_reconcile(timestamp without time zone)',
      'subagent_context_repair(timestamp without time zone,text,boolean,boolean)', 'subagent_context_replay_failures(timestamp without time zone,bigint)',
      'subagent_context_backfill()', 'subagent_context_backfill_step()']) {
      expect(functions.map((x) => x.signature)).toContain(f);
    }
  });

  const expected: Record<Exclude<keyof typeof roles, 'installer'>, string[]> = {
    application: READERS,
    usage: READERS,
    // The doc's block also grants one reconciliation step, so the role can keep health cheap.
    dashboard: [...READERS, 'subagent_context_reconcile(timestamp without time zone)'].sort(),
  };

  it.each(Object.keys(expected) as Array<keyof typeof expected>)('%s: executes exactly the readers, and is refused every other function', async (name) => {
    const role = roles[name];
    const { may, mayNot } = await executable(role);
    expect(may).toEqual(expected[name]);
    expect(mayNot.length).toBe(functions.length - may.length);
    const c = await connectAs(role);
    for (const f of functions) {
      const outcome = await attempt(c, f.call);
      if (may.includes(f.signature)) {
        expect(outcome, `${role} calls ${f.signature}`).toBe('ok');
      } else if (!f.trigger) {
        // A trigger function cannot be called from SQL by anyone; has_function_privilege above says it is refused too.
        expect(outcome, `${role} calls ${f.signature}`).toMatch(/^42501: permission denied for (function|procedure) \w+$/);
      }
    }
    // What it reads is counts and timestamps: the health row works.
    expect((await c.query(`SELECT status, shortfall FROM public.subagent_context_health()`)).rows).toEqual([{ status: 'shortfall', shortfall: 1n }]);
  });

  it('the installing role executes every one: the missing keys, the discrepancies, reconciliation, repair, the backfill', async () => {
    expect((await executable(roles.installer)).mayNot).toEqual([]);
    for (const call of ['SELECT * FROM subagent_context_missing()', 'SELECT * FROM subagent_context_discrepancies()',
      'SELECT * FROM subagent_context_reconcile()', 'SELECT * FROM subagent_context_replay_failures()',
      'SELECT * FROM subagent_context_repair()', 'SELECT * FROM subagent_context_backfill()', 'SELECT * FROM subagent_context_backfill_step()']) {
      expect(await attempt(installer, call), call).toBe('ok');
    }
    expect((await installer.query(`SELECT * FROM subagent_context_missing()`)).rows).toEqual([{ task_session_id: t.session, tool_call_id: 'toolu_1' }]);
  });
});

describe('sizes are not the caller\'s', () => {
  const reading = ['SELECT * FROM subagent_context_reconcile()',
    'SELECT * FROM subagent_context_replay_failures()', 'SELECT * FROM subagent_context_backfill_step()'];

  it.each(['50001', '0', 'abc'])('subagent_context.batch_messages = %s: refused in one sentence by every function that reads it', async (value) => {
    for (const call of reading) {
      await installer.query('BEGIN');
      try {
        await installer.query(`SELECT set_config('subagent_context.batch_messages', $1, true)`, [value]);
        const outcome = await installer.query(call).then(() => 'ok', (e: { code?: string; message: string }) => `${e.code}: ${e.message}`);
        expect(outcome, call).toBe(`22023: subagent-context: subagent_context.batch_messages must be a whole number from 1 to 50000, got "${value}"`);
      } finally {
        await installer.query('ROLLBACK');
      }
    }
  });

  it.each(['50001', '0', 'abc'])('subagent_context.repair_keys = %s: refused in one sentence by repair', async (value) => {
    await installer.query('BEGIN');
    try {
      await installer.query(`SELECT set_config('subagent_context.repair_keys', $1, true)`, [value]);
      const outcome = await installer.query('SELECT * FROM subagent_context_repair()')
        .then(() => 'ok', (e: { code?: string; message: string }) => `${e.code}: ${e.message}`);
      expect(outcome).toBe(`22023: subagent-context: subagent_context.repair_keys must be a whole number from 1 to 50000, got "${value}"`);
    } finally {
      await installer.query('ROLLBACK');
    }
  });

  it('the CLI says it in one sentence, exit 3', async () => {
    const r = await runCli(cli, ['repair'], { DATABASE_URL: urlOf(roles.installer), PGOPTIONS: '-c subagent_context.batch_messages=50001' });
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: subagent_context.batch_messages must be a whole number from 1 to 50000, got "50001"');
  });
});
