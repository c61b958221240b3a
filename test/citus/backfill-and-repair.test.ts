// Backfill and repair at size on Citus (docs/citus.md): 30,000 subagent calls over 300 sessions written
// before `up` are backfilled into exactly the rows a plain installation derives from the same messages
// (built on the suite's server alongside); then 3,000 rows of calls made since activation are deleted,
// `health --full` finds every one of them (exit 1) and `repair` stores them again, rows equal once more.
import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshCitusDatabase, derivedRows, compareRows } from '../helpers/citus.js';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';

const HISTORY = 30_000;
const SESSIONS = 300;
const SINCE = 4_000;    // calls made since activation …
const DELETED = 3_000;  // … of which these lose their rows (every one whose number is not a multiple of 4)

const citus = await freshCitusDatabase('backfill_repair', 'citus/backfill-and-repair.test.ts');
const plain = citus ? await freshDatabase('citus_backfill_plain', { from: 'host' }) : null;
const cli = builtCli();

describe.skipIf(!citus)(`backfill and repair of ${HISTORY} calls over ${SESSIONS} sessions on Citus`, () => {
  let c: pg.Client;
  let p: pg.Client;
  const both = <T>(fn: (q: pg.Client, url: string) => Promise<T>) => Promise.all([fn(c, citus!.url), fn(p, plain!.url)]);
  const cliOn = (url: string, args: string[]) => runCli(cli, [...args, '--json', '--database-url', url]);

  beforeAll(async () => {
    c = await citus!.connect();
    p = await plain!.connect();
    await citus!.createHost();
    await both((q) => writeSubagentCalls(q, 'public', { calls: HISTORY, sessions: SESSIONS, prefix: 'h', base: '2026-01-01 00:00:00' }));
  }, 300_000);

  it('up backfills every call: the rows equal what a plain installation derives', async () => {
    const [onCitus, onPlain] = await both((_q, url) => cliOn(url, ['up']));
    expect(onCitus.stderr).toBe('');
    expect(onCitus.code).toBe(0);
    expect(onPlain.code, onPlain.stderr).toBe(0);
    expect(JSON.parse(onCitus.stdout).backfill).toMatchObject({ status: 'activated', inserted: HISTORY });
    expect(compareRows(await derivedRows(c, 'public'), await derivedRows(p, 'public'))).toBe(`${HISTORY} rows, the same`);
  }, 900_000);

  it(`${DELETED} rows deleted through the coordinator: health --full finds every one (exit 1)`, async () => {
    // Calls made since activation, at the same times on both stores (after both activations).
    const [a, b] = await both((q) => afterActivation(q, 'public'));
    const base = a > b ? a : b;
    await both((q) => writeSubagentCalls(q, 'public', { calls: SINCE, sessions: SESSIONS, prefix: 'l', sessionsOf: 'h', base, step: '100 microseconds' }));
    const [deleted] = await both(async (q) => (await q.query(
      `DELETE FROM task_session_subagents WHERE tool_call_id LIKE 'l-call-%' AND substring(tool_call_id FROM 8)::int % 4 <> 0`)).rowCount);
    expect(deleted).toBe(DELETED);
    const [onCitus, onPlain] = await both((_q, url) => cliOn(url, ['health', '--full']));
    expect(onPlain.code).toBe(1);
    expect(onCitus.stderr).toBe('');
    expect(onCitus.code).toBe(1);
    expect(JSON.parse(onCitus.stdout)).toMatchObject({ status: 'shortfall', shortfall: DELETED, excess: 0 });
  }, 900_000);

  it('repair stores them again: the rows equal the plain installation\'s again', async () => {
    const [onCitus, onPlain] = await both((_q, url) => cliOn(url, ['repair']));
    expect(onPlain.code, onPlain.stderr).toBe(0);
    expect(onCitus.stderr).toBe('');
    expect(onCitus.code).toBe(0);
    expect(JSON.parse(onCitus.stdout)).toMatchObject({ repaired: DELETED, replayed: 0, classified: 0, shortfall: 0, status: 'healthy', stays: { held: 0, stale_failures: 0, key_too_long: 0, value_not_storable: 0, missing_key_too_long: 0, missing_reused_tool_call_id: 0 } });
    expect(compareRows(await derivedRows(c, 'public'), await derivedRows(p, 'public'))).toBe(`${HISTORY + SINCE} rows, the same`);
    const health = await cliOn(citus!.url, ['health']);
    expect(health.code).toBe(0);
    expect(JSON.parse(health.stdout)).toMatchObject({ status: 'healthy', shortfall: 0, excess: 0 });
  }, 900_000);
});
