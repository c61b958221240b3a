// kandev's traffic model (kandev/traffic-write.ts) through pgbouncer in transaction pooling, as kandev's
// writers may reach PostgreSQL (docs/integration.md#behind-a-connection-pooler): every write goes
// through, and replayLive() returns the writes it made whether or not anyone listens to its progress.
// On 4259581 both failed: the model sent named prepared statements, which live on one server connection
// (`prepared statement "kandev-lock-public" already exists` once two clients' transactions shared it), and
// replayLive() counted its writes only inside the optional progress callback, so without one it returned 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { PGBOUNCER, startPgbouncer, type Pgbouncer } from '../helpers/pgbouncer.js';
import { planTraffic } from '../../kandev/traffic-plan.js';
import { replayLive } from '../../kandev/traffic-write.js';

if (!PGBOUNCER) console.warn('pgbouncer-traffic.test.ts skipped: pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)');

const db = await freshDatabase('pgbouncer_traffic', { from: 'installed' });
let bouncer: Pgbouncer;

describe.skipIf(!PGBOUNCER)('the traffic model through pgbouncer in transaction pooling', () => {
  beforeAll(async () => { bouncer = await startPgbouncer(db.url, { poolSize: 2 }); }, 60_000);
  afterAll(async () => { await bouncer?.stop(); });

  it('replays every live write from four writers sharing two server connections, and says how many', async () => {
    const plan = planTraffic({ invalidJson: false });
    const expected = plan.sessions.filter((s) => !s.history).reduce((n, s) => n + s.turns.reduce((m, t) => m + t.writes.length, 0), 0);
    const pool = new pg.Pool({ connectionString: bouncer.url, max: 4 });
    pool.on('error', () => {});
    try {
      expect(await replayLive(pool, 'public', plan, { writers: 4 })).toBe(expected);
    } finally {
      await pool.end();
    }
    expect(expected).toBeGreaterThan(1000);
    const { rows: [s] } = await db.query(`SELECT count(*)::int AS rows,
        (SELECT count(*)::int FROM subagent_context_failures) AS failures FROM task_session_subagents`);
    expect(s).toEqual({ rows: plan.totals.live.subagents, failures: 0 });
  }, 300_000);
});
