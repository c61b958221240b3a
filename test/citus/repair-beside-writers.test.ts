// repair never makes a capture fail on Citus either (docs/citus.md): the workload of
// test/repair/repair-beside-writers.test.ts through the coordinator, smaller (a gap of 2,000 missing rows and 500 failed
// captures: each replay is a distributed transaction, 8 writers updating the frames of exactly those calls under a 4 s statement_timeout): the
// failures are replayed (on 4259581 not one was: Citus refused the replay's UPDATE with clock_timestamp(),
// and repair said a transaction held their rows), no capture fails, every write commits, and nothing is
// missing or stale afterwards.
import { describe, expect, it } from 'vitest';
import { freshCitusDatabase } from '../helpers/citus.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { afterRepair, prepareRepair, startWriters } from '../helpers/repair-beside-writers.js';

const db = await freshCitusDatabase('repair_writers', 'citus/repair-beside-writers.test.ts');
const cli = builtCli();
const WORKLOAD = { gap: 2_000, failed: 500, sessions: 32, prefix: 'rw' };

describe.skipIf(!db)('repair on Citus beside 8 writers of the frames it repairs', () => {
  it('replays every failure; no capture fails, every write commits, nothing missing or stale afterwards', async () => {
    await db!.createHost();
    await db!.up();
    const c = await db!.connect();
    await prepareRepair(c, 'public', WORKLOAD);
    const since = (await c.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`)).rows[0].t as string;
    const writers = startWriters(await Promise.all(Array.from({ length: 8 }, () => db!.connect())), 'public', WORKLOAD);
    const r = await runCli(cli, ['repair', '--json', '--database-url', db!.url]);
    const wrote = await writers.stop();
    expect(r.code, r.stderr).toBe(0);
    // A failure whose row a writer held past repair's short wait stays for the next run (repair says so):
    // with the writers stopped, one more run replays what is left.
    const again = await runCli(cli, ['repair', '--json', '--database-url', db!.url]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(r.stdout).replayed + JSON.parse(again.stdout).replayed).toBe(WORKLOAD.failed);
    expect(wrote.errors).toEqual([]);
    expect(wrote.frames).toBeGreaterThan(0);
    expect(await afterRepair(c, 'public', WORKLOAD, since), r.stdout).toEqual({ missing: 0, stale: 0, failedDuringRepair: [], unreplayed: 0 });
    console.log(`repair on Citus beside 8 writers: ${JSON.stringify(JSON.parse(r.stdout))}; ${wrote.frames} frames written meanwhile`);
  }, 1_800_000);
});
