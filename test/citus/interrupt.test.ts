// Ctrl-C on Citus (docs/citus.md#locks-on-the-workers): SIGINT while `uninstall` or `up` waits for a session
// open on a worker cancels the coordinator's statement and what it runs on the workers, exit 130, and the
// CLI says what it changed. On 4259581 the cancel was never sent (`pg_cancel_backend($1)` is ambiguous
// where Citus adds a bigint variant: "could not confirm the cancel"), the coordinator kept waiting after
// the CLI had exited, and `uninstall` had no handler at all.
import { beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { freshCitusDatabase } from '../helpers/citus.js';
import { captureState, holdOnWorker, leftOnNodes, waitFor } from '../helpers/citus-holders.js';
import { builtCli } from '../helpers/cli.js';
import { createTurn } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const db = await freshCitusDatabase('interrupt', 'citus/interrupt.test.ts');
const cli = builtCli();

/**
 * Starts `subagent-context <args>` behind `kind` open on a worker, waits until a statement of its
 * transaction waits for a lock on that worker, sends SIGINT; returns its exit, its output, and the global
 * pid of its coordinator backend (what Citus names its connections to the workers after).
 */
async function interruptOnWorker(args: string[], kind: 'reader' | 'writer', key: string) {
  const t = await createTurn(await db!.connect(), 'public', key);
  const holder = await holdOnWorker(db!, t.session, kind);
  const worker = await db!.connectTo(db!.workers.find((w) => `${w.host}:${w.port}` === holder.node)!);
  const child = spawn(process.execPath, [cli, ...args, '--database-url', db!.url],
    { cwd: PACKAGE_ROOT, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const waiting = await waitFor(async () => (await worker.query(
      `SELECT substring(application_name FROM 'gpid=([0-9]+)') AS gpid FROM pg_catalog.pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name LIKE 'citus_internal gpid=%'`))
      .rows[0]?.gpid as string | undefined, (g) => g !== undefined, 60_000);
    expect(waiting, 'the CLI reached a statement waiting on the worker').toBeDefined();
    child.kill('SIGINT');
    const code = await exited;
    const left = await waitFor(() => leftOnNodes(db!, waiting), (l) => l.length === 0, 5_000);
    return { code, stdout, stderr, left };
  } finally {
    child.kill('SIGKILL');
    await holder.end();
  }
}

const state = () => captureState(db!);

describe.skipIf(!db)('Ctrl-C while a command waits on a Citus worker', () => {
  beforeAll(async () => {
    await db!.createHost();
    expect((await db!.up()).backfill.status).toBe('activated');
  }, 300_000);

  it('uninstall: cancelled everywhere, exit 130, and it says capture is still installed and activated', async () => {
    const r = await interruptOnWorker(['uninstall'], 'reader', 'un');
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).not.toMatch(/could not confirm the cancel/);
    expect(r.stderr).toMatch(/uninstall was interrupted: the transaction running was rolled back.*capture is still installed and activated/);
    expect(r.left, 'nothing of ours left running or waiting on any node').toEqual([]);
    expect(await state()).toEqual({ keys: 2, trigger: true });
  }, 120_000);

  it('up (an upgrade): cancelled everywhere, exit 130, and it says what it left', async () => {
    await db!.query(`UPDATE public.subagent_context_installed SET code_digest = 'an earlier build'`);
    const r = await interruptOnWorker(['up'], 'writer', 'up');
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).not.toMatch(/could not confirm the cancel/);
    expect(r.stderr).toMatch(/the cancelled transaction was rolled back: the installation is left as it was \(release 0\.5\.0, not upgraded\), capture is installed and activated/);
    expect(r.left, 'nothing of ours left running or waiting on any node').toEqual([]);
    expect(await state()).toEqual({ keys: 2, trigger: true });
    expect((await db!.query(`SELECT code_digest FROM public.subagent_context_installed`)).rows[0].code_digest).toBe('an earlier build');
  }, 120_000);
});
