// repair never makes a capture fail on Citus either (docs/citus.md): the workload of
// test/repair/repair-beside-writers.test.ts through the coordinator, smaller (a gap of 2,000 missing rows and 500 failed
// captures: each replay is a distributed transaction, 8 writers updating the frames of exactly those calls under a 4 s statement_timeout): the
// failures are replayed (on 4259581 not one was: Citus refused the replay's UPDATE with clock_timestamp(),
// and repair said a transaction held their rows), no capture fails, every write commits, and nothing is
// missing or stale afterwards. Then the store alone beside the writers (a gap of 12,000, no failure to
// replay first): rows stored while they write, and the same holds.
import { describe, expect, it } from 'vitest';
import { freshCitusDatabase } from '../helpers/citus.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { afterRepair, prepareRepair, startWriters } from '../helpers/repair-beside-writers.js';

const db = await freshCitusDatabase('repair_writers', 'citus/repair-beside-writers.test.ts');
const cli = builtCli();
const WORKLOAD = { gap: 2_000, failed: 500, sessions: 32, prefix: 'rw' };
// The store itself beside the writers: no failure to replay first (the replay above takes long enough for
// the writers' own captures to fill the gap, so its repair may store nothing), a gap of more than one batch.
const STORE_WORKLOAD = { gap: 12_000, failed: 0, sessions: 32, prefix: 'rs' };

/** `repair --json` while 8 writers update the frames of `workload`'s calls: its output, what they wrote, and what is left. */
async function repairBesideWriters(workload: typeof WORKLOAD) {
  const c = await db!.connect();
  await prepareRepair(c, 'public', workload);
  const since = (await c.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`)).rows[0].t as string;
  const writers = startWriters(await Promise.all(Array.from({ length: 8 }, () => db!.connect())), 'public', workload);
  const r = await runCli(cli, ['repair', '--json', '--database-url', db!.url]);
  const wrote = await writers.stop();
  expect(r.code, r.stderr).toBe(0);
  expect(wrote.errors).toEqual([]);
  expect(wrote.frames).toBeGreaterThan(0);
  return { r, out: JSON.parse(r.stdout), wrote, left: () => afterRepair(c, 'public', workload, since) };
}

describe.skipIf(!db)('repair on Citus beside 8 writers of the frames it repairs', () => {
  it('replays every failure; no capture fails, every write commits, nothing missing or stale afterwards', async () => {
    await db!.createHost();
    await db!.up();
    const { r, out, wrote, left } = await repairBesideWriters(WORKLOAD);
    // A failure whose row a writer held past repair's short wait stays for the next run (repair says so):
    // with the writers stopped, one more run replays what is left.
    const again = await runCli(cli, ['repair', '--json', '--database-url', db!.url]);
    expect(again.code, again.stderr).toBe(0);
    expect(out.replayed + JSON.parse(again.stdout).replayed).toBe(WORKLOAD.failed);
    expect(await left(), r.stdout).toEqual({ missing: 0, stale: 0, failedDuringRepair: [], unreplayed: 0 });
    console.log(`repair on Citus beside 8 writers: ${JSON.stringify(out)}; ${wrote.frames} frames written meanwhile, the longest in ${wrote.longestMs} ms`);
  }, 1_800_000);

  it('stores the gap beside the writers: rows stored, no capture fails, every write commits, nothing missing or stale', async () => {
    const { r, out, wrote, left } = await repairBesideWriters(STORE_WORKLOAD);
    // The repair stored rows while the writers ran: this is the store beside live frames, not after them.
    expect(out.repaired).toBeGreaterThan(0);
    expect(await left(), r.stdout).toEqual({ missing: 0, stale: 0, failedDuringRepair: [], unreplayed: 0 });
    console.log(`repair's store on Citus beside 8 writers: ${JSON.stringify(out)}; ${wrote.frames} frames written meanwhile, the longest in ${wrote.longestMs} ms`);
  }, 1_800_000);
});
