// Health under concurrent writers on Citus (docs/citus.md): while 8 writers INSERT and UPDATE subagent
// frames in sessions on both workers, 40 checks of subagent_context_health() on the coordinator each see
// shortfall 0 and excess 0, as on plain tables (test/health/health-under-writers.test.ts): a check reads one
// moment of the store, never its parts at different moments.
import { describe, expect, it } from 'vitest';
import { freshCitusDatabase, workerOf } from '../helpers/citus.js';
import { healthUnderWriters, nonZero } from '../helpers/health-under-writers.js';
import { createTurn } from '../../kandev/host.js';

const db = await freshCitusDatabase('health_under_writers', 'citus/health-under-writers.test.ts');

describe.skipIf(!db)('health on a Citus coordinator while 8 writers write subagent frames on both workers', () => {
  it('40 checks, none with a shortfall or an excess', async () => {
    await db!.createHost();
    expect((await db!.up()).backfill.status).toBe('activated');
    const c = await db!.connect();
    const sessions: string[] = [];
    for (let i = 0; i < 8; i++) sessions.push((await createTurn(c, 'public', `w${i}`, '2026-08-12 09:00:00')).session);
    const workers = new Set<string>();
    for (const s of sessions) workers.add(await workerOf(db!, 'public', s));
    expect(workers.size, 'the sessions are on both workers').toBe(2);
    const writers = await Promise.all(Array.from({ length: 8 }, () => db!.connect()));
    const { checks, calls, after } = await healthUnderWriters({ schema: 'public', sessions, writers, checker: await db!.connect(), checks: 40 });
    expect(checks).toHaveLength(40);
    expect(calls).toBeGreaterThanOrEqual(40);
    expect(nonZero(checks)).toBe('0 of 40 checks with a shortfall or an excess');
    // No false alarm: health compares the newest messages itself and counts the rest (behind) until a
    // reconciliation step, which these SQL calls do not run, moves its frontier (docs/health.md).
    expect(after).toMatchObject({ shortfall: 0n, excess: 0n });
    expect(['healthy', 'behind']).toContain(after.status);
  }, 300_000);
});
