// `up` and `uninstall` behind pgbouncer in transaction pooling, where one client's consecutive
// transactions may run on different server connections (made certain here: pgbouncer discards every
// server session after each transaction, server_reset_query_always), so nothing a command needs may
// live on its session (docs/install.md#behind-a-connection-pooler): `up` installs into the schema it is
// given, reports what its own backfill stored, and two at once never record a migration twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { PGBOUNCER, startPgbouncer, type Pgbouncer } from '../helpers/pgbouncer.js';
import { MIGRATIONS } from '../helpers/migrations.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';

if (!PGBOUNCER) console.warn('pgbouncer-up.test.ts skipped: pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)');

const db = await freshDatabase('pgbouncer_up', { from: 'host' });
const cli = builtCli();
let bouncer: Pgbouncer;

const cliThrough = (args: string[]) => runCli(cli, [...args, '--database-url', bouncer.url]);

async function history(schema: string, n: number) {
  const t = await createTurn(db.pool, schema, 'hist');
  for (let i = 0; i < n; i++) {
    await insertMessage(db.pool, schema, { id: `hist-${i}`, session: t.session, task: t.task, turn: t.turn,
      created_at: '2026-08-01 08:00:00', metadata: subagentMetadata({ tool_call_id: `toolu_hist_${i}`, status: 'completed' }) });
  }
}

const recorded = async (schema: string) => (await db.query(
  `SELECT name FROM "${schema}".subagent_context_migrations ORDER BY id`)).rows.map((r) => r.name);
const backfilled = async (schema: string) => Number((await db.query(
  `SELECT count(*) AS n FROM "${schema}".task_session_subagents WHERE source = 'backfill'`)).rows[0].n);

describe.skipIf(!PGBOUNCER)('through pgbouncer that resets every server session after each transaction', () => {
  beforeAll(async () => {
    await db.createHost('other');
    await history('public', 50);
    await history('other', 30);
    bouncer = await startPgbouncer(db.url, { poolSize: 2, resetEveryTransaction: true });
  }, 60_000);

  afterAll(async () => { await bouncer?.stop(); });

  it('up reports the rows its backfill stored', async () => {
    const r = await cliThrough(['up']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^backfill: activated\n\s+rows backfilled\s+50\n/m);
    expect(await backfilled('public')).toBe(50);
    expect(await recorded('public')).toEqual(MIGRATIONS);
  }, 60_000);

  it('up --schema other installs into other and only there, and reports its backfill', async () => {
    const r = await cliThrough(['up', '--schema', 'other']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^backfill: activated\n\s+rows backfilled\s+30\n/m);
    expect(await backfilled('other')).toBe(30);
    expect(await recorded('other')).toEqual(MIGRATIONS);
    expect(await recorded('public')).toEqual(MIGRATIONS);
    expect(await backfilled('public')).toBe(50);
  }, 60_000);

  it('uninstall --schema other removes it from other only', async () => {
    const r = await cliThrough(['uninstall', '--schema', 'other']);
    expect(r.code, r.stderr).toBe(0);
    const { rows: [s] } = await db.query(
      `SELECT to_regprocedure('other.subagent_context_health()') IS NULL AS gone_there,
              to_regprocedure('public.subagent_context_health()') IS NOT NULL AS kept_here`);
    expect(s).toEqual({ gone_there: true, kept_here: true });
    const h = await cliThrough(['health']);
    expect(h.code, h.stdout + h.stderr).toBe(0);
  }, 60_000);

  it('two ups at once: each installs or stops in one sentence, and every migration is recorded once', async () => {
    for (const schema of ['race_1', 'race_2', 'race_3']) {
      await db.createHost(schema);
      await history(schema, 20);
      const runs = await Promise.all([0, 1].map(() => cliThrough(['up', '--schema', schema])));
      for (const r of runs) {
        if (r.code === 0) expect(r.stdout).toMatch(/installed and activated/);
        else {
          // The holder is named by pid, or, when the other up committed before this one looked, said to have
          // ended (CI, 7 December: the race is the machine's, the sentence is true either way).
          expect(r.code).toBe(3);
          expect(r.stderr.trim().split('\n')).toHaveLength(1);
          expect(r.stderr).toMatch(/^error: another `subagent-context up` \(or node-pg-migrate\) (is installing into this database right now \((pid \d+|a session that has since ended)\)|installed or removed migrations in this schema while this one ran), so this one stopped, changing nothing more/);
        }
      }
      expect(runs.some((r) => r.code === 0)).toBe(true);
      expect(await recorded(schema)).toEqual(MIGRATIONS);
      expect(await backfilled(schema)).toBe(20);
      const again = await cliThrough(['up', '--schema', schema]);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^migrations: up to date$/m);
    }
  }, 120_000);
});
