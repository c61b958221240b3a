// Health under concurrent writers, on plain tables (docs/health.md): capture writes a message and its row
// in one transaction, and health reads in one snapshot, so while 8 writers INSERT and UPDATE subagent
// frames no check sees a subagent missing or a row without its message: 40 checks, every one shortfall 0
// and excess 0. The same workload on Citus: test/citus/health-under-writers.test.ts.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { healthUnderWriters, nonZero } from '../helpers/health-under-writers.js';
import { createTurn } from '../../kandev/host.js';

const db = await freshDatabase('health_under_writers', { from: 'installed' });

describe('health while 8 writers write subagent frames', () => {
  it('40 checks, none with a shortfall or an excess', async () => {
    const sessions: string[] = [];
    for (let i = 0; i < 8; i++) sessions.push((await createTurn(db.pool, 'public', `w${i}`, '2026-08-12 09:00:00')).session);
    const writers = await Promise.all(Array.from({ length: 8 }, () => db.connect()));
    const { checks, calls, after } = await healthUnderWriters({ schema: 'public', sessions, writers, checker: await db.connect(), checks: 40 });
    expect(checks).toHaveLength(40);
    expect(calls).toBeGreaterThanOrEqual(40);
    expect(nonZero(checks)).toBe('0 of 40 checks with a shortfall or an excess');
    expect(after).toEqual({ shortfall: 0n, excess: 0n, status: 'healthy' });
  });
});
