// repair never makes a capture fail (docs/reliability.md#repair): beside 8 kandev writers that update the
// frames of exactly the calls it works on, under kandev's statement_timeout of 4 s, a repair that replays
// 2,600 failed captures and stores a gap of 20,000 missing rows records no capture failure, every writer's
// statement commits, and afterwards no row is missing and none is stale. The same on Citus:
// test/citus/repair-beside-writers.test.ts. On 4259581 the store's batches of 5,000 keys and the replay's
// batch of 5,000 failures, each one transaction, held their rows past capture's 200 ms wait: captures
// failed (55P03) and as many rows were left stale.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { afterRepair, prepareRepair, startWriters } from '../helpers/repair-beside-writers.js';

const db = await freshDatabase('repair_beside_writers', { from: 'installed' });
const cli = builtCli();
// REPAIR_GAP=500000 for the field's size (the closing numbers in docs/reliability.md#repair); CI runs 20,000.
const WORKLOAD = { gap: Number(process.env.REPAIR_GAP ?? 20_000), failed: 2_600, sessions: 64, prefix: 'rw' };

describe('repair beside 8 writers of the frames it repairs', () => {
  it('no capture fails, every write commits, nothing missing or stale afterwards', async () => {
    const c = await db.connect();
    await prepareRepair(c, 'public', WORKLOAD);
    const since = (await c.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`)).rows[0].t as string;
    const writers = startWriters(await Promise.all(Array.from({ length: 8 }, () => db.connect())), 'public', WORKLOAD);
    const t0 = Date.now();
    const r = await runCli(cli, ['repair', '--json'], { DATABASE_URL: db.url });
    const seconds = (Date.now() - t0) / 1000;
    const wrote = await writers.stop();
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ replayed: WORKLOAD.failed });
    expect(wrote.errors).toEqual([]);
    expect(wrote.frames).toBeGreaterThan(0);
    expect(await afterRepair(c, 'public', WORKLOAD, since), r.stdout).toEqual({ missing: 0, stale: 0, failedDuringRepair: [], unreplayed: 0 });
    console.log(`repair beside 8 writers: ${seconds.toFixed(1)} s, ${JSON.stringify(JSON.parse(r.stdout))}; ${wrote.frames} frames written meanwhile, the longest in ${wrote.longestMs} ms`);
  }, 600_000 + WORKLOAD.gap * 2);
});
