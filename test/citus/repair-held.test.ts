// repair on Citus meets a row that a transaction of kandev still holds on a worker (docs/reliability.md#repair):
// it stores the other missing key, leaves the held one recorded, and ends instead of waiting on the worker
// for as long as that transaction stays open. The wait is bounded where the row is: each worker's insert
// must give up on its own, since a lock_timeout set on the coordinator is not what the worker waits under.
import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { spawn } from 'node:child_process';
import { freshCitusDatabase } from '../helpers/citus.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const db = await freshCitusDatabase('repair_held', 'citus/repair-held.test.ts');
const cli = builtCli();
const health = async (...args: string[]) => {
  const r = await runCli(cli, ['health', '--json', ...args, '--database-url', db!.url]);
  return { code: r.code, stderr: r.stderr, ...(r.stdout ? JSON.parse(r.stdout) : {}) };
};

/** `repair --json`, started without waiting: its exit code, or 'still waiting' after `ms`. */
function repairWithin(ms: number) {
  const child = spawn(process.execPath, [cli, 'repair', '--json', '--database-url', db!.url], { cwd: PACKAGE_ROOT,
    env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), ms).unref());
  return Promise.race([exited, timer]).then((code) => {
    if (code === 'still waiting') child.kill('SIGKILL');
    return { code, stdout, stderr };
  });
}

describe.skipIf(!db)('repair while kandev holds a missing row on a worker', () => {
  let c: pg.Client;
  const rows = async (calls: string[]) => (await c.query(
    `SELECT tool_call_id FROM task_session_subagents WHERE tool_call_id = ANY($1) ORDER BY 1`, [calls])).rows.map((r) => r.tool_call_id);

  beforeAll(async () => {
    c = await db!.connect();
    await db!.createHost();
    expect((await db!.up()).backfill.status).toBe('activated');
    await writeSubagentCalls(c, 'public', { calls: 40, sessions: 8, prefix: 'h', base: await afterActivation(c, 'public'), step: '1 millisecond' });
    expect(await health('--full')).toMatchObject({ code: 0, status: 'healthy', shortfall: 0 });
  }, 300_000);

  it('stores the free key, leaves the held one, and ends while the transaction is still open', async () => {
    await c.query(`DELETE FROM task_session_subagents WHERE tool_call_id IN ('h-call-3', 'h-call-4')`);
    expect(await health('--full')).toMatchObject({ code: 1, shortfall: 2 });
    // kandev writes h-call-3's next frame and stays in its transaction: capture inserted its row, uncommitted.
    const idle = await db!.connect();
    try {
      await idle.query('BEGIN');
      await idle.query(`UPDATE task_session_messages SET updated_at = updated_at WHERE id = 'h-m3'`);
      const r = await repairWithin(60_000);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 1, shortfall: 1, status: 'shortfall' });
      expect(await rows(['h-call-3', 'h-call-4'])).toEqual(['h-call-4']);
    } finally {
      await idle.query('COMMIT');
      await idle.end();
    }
    expect(await rows(['h-call-3', 'h-call-4'])).toEqual(['h-call-3', 'h-call-4']);
    expect(await health()).toMatchObject({ code: 0, status: 'healthy', shortfall: 0 });
  }, 300_000);
});
