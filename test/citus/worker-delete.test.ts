// A row deleted on a worker, behind the coordinator's back (docs/citus.md, "Every command"): capture and the
// last reconciliation had seen it, so a plain `health` still answers healthy (it compares only what was
// written since the newest reconciliation, docs/health.md); `health --full` finds it (exit 1, shortfall 1)
// and `repair` stores it again from its message.
import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshCitusDatabase, workerOf } from '../helpers/citus.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';

const db = await freshCitusDatabase('worker_delete', 'citus/worker-delete.test.ts');
const cli = builtCli();
const health = async (...args: string[]) => {
  const r = await runCli(cli, ['health', '--json', ...args, '--database-url', db!.url]);
  return { code: r.code, stderr: r.stderr, ...(r.stdout ? JSON.parse(r.stdout) : {}) };
};

describe.skipIf(!db)('a row deleted directly on a worker', () => {
  let c: pg.Client;
  const row = async (call: string) => (await c.query(
    `SELECT task_session_id, task_id, turn_id, agent_execution_id, subagent_type, agent_status, tool_status, total_tokens, observed_at, settled_at
       FROM task_session_subagents WHERE tool_call_id = $1`, [call])).rows;

  beforeAll(async () => {
    c = await db!.connect();
    await db!.createHost();
    expect((await db!.up()).backfill.status).toBe('activated');
    await writeSubagentCalls(c, 'public', { calls: 40, sessions: 8, prefix: 'l', base: await afterActivation(c, 'public'), step: '1 millisecond' });
    expect(await health('--full')).toMatchObject({ code: 0, status: 'healthy', shortfall: 0 });
  }, 300_000);

  it('is found by health --full, not before, and repair stores it again', async () => {
    const call = 'l-call-5';
    const { rows: [{ task_session_id: session }] } = await c.query(`SELECT task_session_id FROM task_session_messages WHERE id = 'l-m5'`);
    const before = await row(call);
    expect(before).toHaveLength(1);
    // On the worker that holds the session's shard, in the shard table itself: the coordinator is not involved.
    const { rows: [shard] } = await c.query(
      `SELECT shardid, nodename, nodeport FROM citus_shards
        WHERE table_name = 'task_session_subagents'::regclass
          AND shardid = get_shard_id_for_distribution_column('task_session_subagents', $1::text)`, [session]);
    expect(`${shard.nodename}:${shard.nodeport}`).toBe(await workerOf(db!, 'public', session));
    const worker = await db!.connectTo({ host: shard.nodename, port: Number(shard.nodeport) });
    const gone = await worker.query(`DELETE FROM public.task_session_subagents_${shard.shardid} WHERE tool_call_id = $1`, [call]);
    expect(gone.rowCount).toBe(1);
    expect(await row(call)).toEqual([]);

    expect(await health(), 'plain health: the reconciliation had seen that row').toMatchObject({ code: 0, status: 'healthy', shortfall: 0 });
    expect(await health('--full')).toMatchObject({ code: 1, status: 'shortfall', shortfall: 1 });

    const repair = await runCli(cli, ['repair', '--json', '--database-url', db!.url]);
    expect(repair.stderr).toBe('');
    expect(JSON.parse(repair.stdout)).toMatchObject({ repaired: 1, replayed: 0, classified: 0, shortfall: 0, status: 'healthy', stays: { held: 0, stale_failures: 0, key_too_long: 0, value_not_storable: 0, missing_key_too_long: 0, missing_reused_tool_call_id: 0 } });
    expect(await row(call)).toEqual(before);
    expect(await health()).toMatchObject({ code: 0, status: 'healthy', shortfall: 0 });
  }, 300_000);
});
