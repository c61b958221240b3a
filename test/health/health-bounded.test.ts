// Health bounded in every state, and a reader (docs/health.md#bounded-in-every-state, #a-reader): one call
// compares at most subagent_context.health_messages of what lies past the reconciliation's frontier and
// counts the rest (uncompared), answering `behind`, never `healthy`, about messages it did not look at; the
// reconciliation's steps catch up; repair compares everything first, stores every miss, and says what is
// left. The cap is set to 20 here so that a burst of a few hundred messages stands for 150,000.
// On 4259581 each health call compared every message since reconciled_at (8.9 s after a 150k burst) and
// said `healthy` or `shortfall` about all of them; a PUBLIC-only role idle in a transaction around
// subagent_context_health() held the found-miss record's row locks, and `health`, `repair` and the scrape
// waited on them (up 0 after 8 s, health and repair past 25 s).
import { afterAll, describe, expect, it } from 'vitest';
import { freshDatabase, writeUncaptured } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { builtCli, runCli, type CliResult } from '../helpers/cli.js';

const cli = builtCli();
const db = await freshDatabase('health_bounded', { from: 'installed' });
const CAP = 20;
const dbName = new URL(db.url).pathname.slice(1);
await db.query(`ALTER DATABASE "${dbName}" SET subagent_context.health_messages = '${CAP}'`);
// A new connection of the pool gets the setting; these reads use their own.
const q = async (sql: string) => {
  const c = await db.connect();
  try { return (await c.query(sql)).rows; } finally { await c.end(); }
};
const health = async () => (await q(`SELECT shortfall::int, uncompared::int, status FROM public.subagent_context_health()`))[0];
const utcNow = async (): Promise<string> => (await q(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`))[0].t;
const frame = (id: string) => subagentMetadata({ tool_call_id: id, status: 'pending', subagent: { status: 'async_launched' } });
const cliJson = async (args: string[]) => {
  const r = await runCli(cli, [...args, '--json'], { DATABASE_URL: db.url });
  return { code: r.code, body: JSON.parse(r.stdout || 'null'), stderr: r.stderr };
};
/** The reconciliation's steps until it has nothing to do, as the exporter runs them in the background. */
async function catchUp(): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const [s] = await q(`SELECT status FROM public.subagent_context_reconcile()`);
    if (s.status !== 'stepped') return;
  }
  throw new Error('the reconciliation did not catch up in 1000 steps');
}

const t = await createTurn(db.pool, 'public', 'burst', await utcNow());

// The bursts are written inside the tests: a describe's body runs when the file is collected, before any test.
describe('a burst capture saw, larger than one call compares', () => {
  it('is behind, not healthy: what the call did not compare it counts, and the CLI exits 1', async () => {
    const c = await db.connect();
    for (let i = 0; i < 150; i++) {
      await insertMessage(c, 'public', { id: `seen-${i}`, session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame(`toolu_seen_${i}`) });
    }
    await c.end();
    expect(await health()).toEqual({ shortfall: 0, uncompared: 150 - CAP, status: 'behind' });
    const r = await cliJson(['health']);
    expect(r.code).toBe(1);
    expect(r.body).toMatchObject({ status: 'behind', shortfall: 0 });
  });

  it('the reconciliation catches up, and then health is healthy with nothing left to compare', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1100)); // past the settling second
    await catchUp();
    expect(await health()).toEqual({ shortfall: 0, uncompared: 0, status: 'healthy' });
  });
});

describe('a burst capture missed', () => {
  it('health finds the newest misses at once and counts the rest as not compared', async () => {
    for (let i = 0; i < 120; i++) {
      await writeUncaptured(db, 'public', { id: `missed-${i}`, session: t.session, task: t.task, turn: t.turn, created_at: await utcNow(), metadata: frame(`toolu_missed_${i}`) });
    }
    expect(await health()).toEqual({ shortfall: CAP, uncompared: 120 - CAP, status: 'shortfall' });
  });

  it('a PUBLIC-only role idle in a transaction around health holds up neither a scrape, nor health, nor repair', async () => {
    await db.query(`DROP ROLE IF EXISTS health_bounded_public; CREATE ROLE health_bounded_public LOGIN`);
    const url = new URL(db.url);
    url.username = 'health_bounded_public';
    url.password = '';
    const { default: pg } = await import('pg');
    const holder = new pg.Client({ connectionString: url.toString() });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      expect((await holder.query(`SELECT status FROM public.subagent_context_health()`)).rows[0].status).toBe('shortfall');
      // Each command must end while the holder stays idle; a hang is caught by the guard (not a timing claim).
      const guard = (p: Promise<CliResult>) => Promise.race([p, new Promise<CliResult>((_, reject) =>
        setTimeout(() => reject(new Error('did not finish while a PUBLIC-only role sat idle in a transaction')), 60_000))]);
      const scrape = await guard(runCli(cli, ['metrics', '--once'], { DATABASE_URL: db.url }));
      expect(scrape.stdout).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
      expect(scrape.stdout).toMatch(/^subagent_context_status\{schema="public",status="shortfall"\} 1$/m);
      const h = await guard(runCli(cli, ['health', '--json'], { DATABASE_URL: db.url }));
      expect(h.code).toBe(1);
      const repaired = await guard(runCli(cli, ['repair', '--json'], { DATABASE_URL: db.url }));
      expect(repaired.code).toBe(0);
      expect(JSON.parse(repaired.stdout)).toMatchObject({ repaired: 120, held: 0, shortfall: 0, uncompared: 0, status: 'healthy' });
      const [state] = (await db.query(`SELECT state FROM pg_stat_activity WHERE usename = 'health_bounded_public'`)).rows;
      expect(state.state).toBe('idle in transaction');
    } finally {
      await holder.end();
    }
  });

  it('after the repair, health --full finds nothing more and health is healthy', async () => {
    const full = await cliJson(['health', '--full']);
    expect(full.code).toBe(0);
    expect(full.body).toMatchObject({ status: 'healthy', shortfall: 0, uncompared: 0 });
  });
});

afterAll(async () => {
  await db.query(`DROP ROLE IF EXISTS health_bounded_public`).catch(() => {});
});
