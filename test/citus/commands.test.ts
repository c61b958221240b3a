// Citus (docs/citus.md): kandev's tables distributed and co-located on task_session_id on a real cluster (a
// coordinator and workers). Every command works there, or refuses in one sentence; above all, health never
// answers from the coordinator's empty shell tables.
//
// Needs a Citus coordinator (test/helpers/citus.ts): CITUS_COORDINATOR_URL=postgres://…; without one this
// file skips, saying so. It works in a database of its own on the cluster, dropped at the end.
import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { PACKAGE_VERSION } from '#sql';
import { subagentMetadata } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { freshCitusDatabase } from '../helpers/citus.js';
import { utcTimestamp } from '../../src/timestamp.js';

const db = await freshCitusDatabase('commands', 'citus/commands.test.ts');
const S = 'kandev';      // the installation under test
const BARE = 'bare';     // kandev distributed, but the capture tables not created first
let c: pg.Client;
let cli = '';

const q = (text: string, values?: unknown[]) => c.query(text, values);
const health = async () => (await q(`SELECT * FROM ${S}.subagent_context_health()`)).rows[0];
const rows = async () => (await q(
  `SELECT task_session_id, tool_call_id, agent_execution_id, source, subagent_type, agent_status, total_tokens
     FROM ${S}.task_session_subagents ORDER BY task_session_id, tool_call_id`)).rows;
const cliRun = (args: string[]) => runCli(cli, [...args, '--database-url', db!.url, '--schema', S]);

/** The worker (host:port) holding the shard of `session` in `table`. */
async function nodeOf(schema: string, session: string): Promise<string> {
  const { rows: [r] } = await q(
    `SELECT s.nodename || ':' || s.nodeport AS node FROM citus_shards AS s
      WHERE s.table_name = format('%I.task_session_messages', $1::text)::regclass
        AND s.shardid = get_shard_id_for_distribution_column(format('%I.task_session_messages', $1::text), $2::text)`,
    [schema, session]);
  return r.node;
}

let sessions: string[] = [];  // two sessions whose shards live on two different workers

async function write(id: string, session: string, metadata: string, at = 'now') {
  const time = at === 'now' ? `(clock_timestamp() AT TIME ZONE 'UTC')` : `'${at}'::timestamp`;
  await q(`INSERT INTO ${S}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
           VALUES ($1, $2, 'task-1', 'turn-' || $2, 'agent', '', 'tool_call', $3, ${time}, ${time})`, [id, session, metadata]);
}

describe.skipIf(!db)('on a Citus cluster, kandev distributed on task_session_id', () => {
  beforeAll(async () => {
    cli = builtCli();
    c = await db!.connect();
    await db!.createHost(S);
    await db!.createHost(BARE, 'host only');
    // Two sessions on two different workers, so capture is seen on more than one node.
    await q(`INSERT INTO ${S}.tasks VALUES ('task-1', 't', '2026-08-01', '2026-08-01')`);
    const byNode = new Map<string, string>();
    for (let i = 0; byNode.size < 2 && i < 64; i++) {
      const session = `session-${i}`;
      const node = await nodeOf(S, session);
      if (!byNode.has(node)) byNode.set(node, session);
    }
    sessions = [...byNode.values()];
    expect(sessions).toHaveLength(2);
    for (const s of sessions) {
      await q(`INSERT INTO ${S}.task_sessions VALUES ($1, 'task-1', '2026-08-01', '2026-08-01')`, [s]);
      await q(`INSERT INTO ${S}.task_session_turns VALUES ('turn-' || $1, $1, 'task-1', '2026-08-01', '2026-08-01', '2026-08-01')`, [s]);
    }
  }, 180_000);

  it('up refuses, in one sentence and changing nothing, when the capture tables are not distributed first', async () => {
    const err = await up(c, BARE).then(() => null, (e: Error) => e);
    expect(err?.message).toMatch(/^subagent-context: on Citus, create task_session_subagents distributed on task_session_id and co-located with task_session_messages before `up`/);
    expect((await q(`SELECT to_regclass('${BARE}.task_session_subagents') AS t,
                            to_regprocedure('${BARE}.subagent_context_health()') AS f,
                            (SELECT count(*)::int FROM pg_trigger WHERE tgrelid = '${BARE}.task_session_messages'::regclass
                                AND NOT tgisinternal) AS triggers`)).rows[0])
      .toEqual({ t: null, f: null, triggers: 0 });
  });

  it('up installs and activates: history from both workers is backfilled', async () => {
    await write('m-old-0', sessions[0], subagentMetadata({ tool_call_id: 'call-old', status: 'completed',
      subagent: { subagent_type: 'explorer', total_tokens: 120 } }), '2026-08-01 10:00:00');
    await write('m-old-1', sessions[1], subagentMetadata({ tool_call_id: 'call-old', status: 'pending',
      agent_execution_id: 'exec-7', subagent: { status: 'async_launched' } }), '2026-08-01 10:00:00');
    const result = await up(c, S);
    expect(result.backfill).toMatchObject({ status: 'activated', inserted: 2 });
    expect(await rows()).toEqual([
      { task_session_id: sessions[0], tool_call_id: 'call-old', agent_execution_id: 'unknown', source: 'backfill', subagent_type: 'explorer', agent_status: null, total_tokens: 120n },
      { task_session_id: sessions[1], tool_call_id: 'call-old', agent_execution_id: 'exec-7', source: 'backfill', subagent_type: null, agent_status: 'async_launched', total_tokens: null },
    ].sort((a, b) => a.task_session_id.localeCompare(b.task_session_id)));
    expect(await health()).toMatchObject({ activated: true, shortfall: 0n, status: 'idle' });
  });

  it('captures on both workers, merges updates, and the counters sum every node', async () => {
    const before = (await q(`SELECT * FROM ${S}.subagent_context_stats()`)).rows[0];
    for (const [i, s] of sessions.entries()) {
      await write(`m-live-${i}`, s, subagentMetadata({ tool_call_id: 'call-live', status: 'pending', subagent: { status: 'async_launched' } }));
      // (Citus refuses volatile functions in an UPDATE of a distributed table: kandev sends the time.)
      await q(`UPDATE ${S}.task_session_messages SET metadata = $2, updated_at = $4::timestamp
                WHERE task_session_id = $1 AND id = $3`,
        [s, subagentMetadata({ tool_call_id: 'call-live', status: 'completed', subagent: { subagent_type: 'reviewer', status: 'completed', total_tokens: 7 } }), `m-live-${i}`,
         utcTimestamp(Date.now() + 1000)]);
    }
    const live = (await rows()).filter((r) => r.tool_call_id === 'call-live');
    expect(live).toEqual(sessions.map((s) => ({ task_session_id: s, tool_call_id: 'call-live', agent_execution_id: 'unknown',
      source: 'live', subagent_type: 'reviewer', agent_status: 'completed', total_tokens: 7n })).sort((a, b) => a.task_session_id.localeCompare(b.task_session_id)));
    expect(new Set(await Promise.all(sessions.map((s) => nodeOf(S, s)))).size).toBe(2);
    const after = (await q(`SELECT * FROM ${S}.subagent_context_stats()`)).rows[0];
    expect(after.attempted - before.attempted).toBe(4n);  // 2 inserts + 2 updates, counted on the workers
    expect(after.persisted - before.persisted).toBe(4n);
    expect(await health()).toMatchObject({ shortfall: 0n, excess: 0n, status: 'healthy' });
  });

  it('health reads the shards: a row deleted on a worker is a shortfall (exit 1), and repair stores it again', async () => {
    await q(`DELETE FROM ${S}.task_session_subagents WHERE task_session_id = $1 AND tool_call_id = 'call-live'`, [sessions[1]]);
    expect(await health()).toMatchObject({ shortfall: 1n, status: 'shortfall' });
    const h = await cliRun(['health', '--json']);
    expect(h.code).toBe(1);
    expect(JSON.parse(h.stdout)).toMatchObject({ status: 'shortfall', shortfall: 1 });
    const r = await cliRun(['repair', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 1, replayed: 0, classified: 0, shortfall: 0, status: 'healthy', stays: { held: 0, stale_failures: 0, key_too_long: 0, value_not_storable: 0, missing_key_too_long: 0, missing_reused_tool_call_id: 0 } });
    expect(await health()).toMatchObject({ shortfall: 0n, status: 'healthy' });
  });

  it('a capture failure on a worker is logged there, counted by health, and the message write commits', async () => {
    const huge = randomBytes(1500).toString('hex');  // too long for the unique key's btree entry (and incompressible): the upsert raises
    await write('m-huge', sessions[0], subagentMetadata({ tool_call_id: huge, subagent: {} }));
    expect((await q(`SELECT count(*)::int AS n FROM ${S}.task_session_messages WHERE id = 'm-huge'`)).rows[0].n).toBe(1);
    expect((await q(`SELECT task_session_id, sqlstate FROM ${S}.subagent_context_failures`)).rows)
      .toEqual([{ task_session_id: sessions[0], sqlstate: '54000' }]);
    expect(await health()).toMatchObject({ failures: 1n, shortfall: 1n, status: 'shortfall' });
    await q(`DELETE FROM ${S}.task_session_messages WHERE task_session_id = $1 AND id = 'm-huge'`, [sessions[0]]);
    expect(await health()).toMatchObject({ shortfall: 0n, failures: 1n, status: 'stale' });  // the failure is not replayed yet: `repair` would
  });

  it('the execution id travels in metadata and with SET LOCAL (propagate_set_commands), not set_config', async () => {
    await write('m-meta', sessions[0], subagentMetadata({ tool_call_id: 'call-exec-meta', agent_execution_id: 'exec-meta', subagent: {} }));
    await q('BEGIN');
    await q(`SET LOCAL citus.propagate_set_commands = 'local'`);
    await q(`SET LOCAL subagent_context.agent_execution_id = 'exec-local'`);
    await write('m-local', sessions[0], subagentMetadata({ tool_call_id: 'call-exec-local', subagent: {} }));
    await q('COMMIT');
    await q('BEGIN');
    await q(`SELECT set_config('subagent_context.agent_execution_id', 'exec-config', true)`);
    await write('m-config', sessions[0], subagentMetadata({ tool_call_id: 'call-exec-config', subagent: {} }));
    await q('COMMIT');
    const exec = (await rows()).filter((r) => r.tool_call_id.startsWith('call-exec-'))
      .map((r) => [r.tool_call_id, r.agent_execution_id]);
    // set_config() stays on the coordinator; the trigger fires on the worker and sees no setting.
    expect(exec).toEqual([['call-exec-config', 'unknown'], ['call-exec-local', 'exec-local'], ['call-exec-meta', 'exec-meta']]);
  });

  it('a shard moved to another worker keeps its trigger and capture', async () => {
    const { rows: [shard] } = await q(
      `SELECT s.shardid, s.nodename, s.nodeport FROM citus_shards AS s
        WHERE s.table_name = '${S}.task_session_messages'::regclass
          AND s.shardid = get_shard_id_for_distribution_column('${S}.task_session_messages', $1::text)`, [sessions[0]]);
    const { rows: [target] } = await q(
      `SELECT nodename, nodeport FROM pg_dist_node WHERE isactive AND shouldhaveshards AND noderole = 'primary'
          AND (nodename, nodeport) <> ($1, $2) ORDER BY nodeport LIMIT 1`, [shard.nodename, shard.nodeport]);
    await q(`SELECT citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`,
      [shard.shardid, shard.nodename, shard.nodeport, target.nodename, target.nodeport]);
    expect(await nodeOf(S, sessions[0])).toBe(`${target.nodename}:${target.nodeport}`);
    await write('m-moved', sessions[0], subagentMetadata({ tool_call_id: 'call-moved', subagent: { subagent_type: 'mover' } }));
    expect((await rows()).find((r) => r.tool_call_id === 'call-moved')).toMatchObject({ task_session_id: sessions[0], subagent_type: 'mover' });
    expect(await health()).toMatchObject({ shortfall: 0n, status: 'stale' });  // (the failure above, not replayed)
  });

  it('8 concurrent writers on both workers: every frame captured, no error, one row per key', async () => {
    const writers = await Promise.all(Array.from({ length: 8 }, () => db!.connect()));
    const stamp = (n: number) => utcTimestamp(Date.now() + n);
    try {
      await Promise.all(writers.map(async (w, i) => {
        for (let k = 0; k < 10; k++) {
          const session = sessions[(i + k) % 2];
          const call = `call-conc-${k % 5}`;  // writers collide on the same 5 keys per session
          const id = `m-conc-${i}-${k}`;
          await w.query(`INSERT INTO ${S}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                         VALUES ($1, $2, 'task-1', 'turn-' || $2, 'agent', '', 'tool_call', $3, $4::timestamp, $4::timestamp)`,
            [id, session, subagentMetadata({ tool_call_id: call, subagent: { status: 'async_launched' } }), stamp(k)]);
          await w.query(`UPDATE ${S}.task_session_messages SET metadata = $3, updated_at = $4::timestamp WHERE task_session_id = $1 AND id = $2`,
            [session, id, subagentMetadata({ tool_call_id: call, status: 'completed', subagent: { total_tokens: 10 + i } }), stamp(k + 1)]);
        }
      }));
    } finally {
      await Promise.all(writers.map((w) => w.end()));
    }
    const conc = (await rows()).filter((r) => r.tool_call_id.startsWith('call-conc-'));
    expect(conc).toHaveLength(10);  // 5 keys in each of the 2 sessions
    expect(conc.every((r) => r.total_tokens !== null && r.source === 'live')).toBe(true);
    expect(await health()).toMatchObject({ shortfall: 0n, failures: 1n, status: 'stale' });  // (the one failure above)
  });

  it('report: every panel from the shards; nesting refused in one sentence', async () => {
    const r = await cliRun(['report', '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.overview).toMatchObject({ subagents: 18, live: 15, backfill: 3, sessions: 2 });  // one live row was repaired
    expect(report.nesting).toBeNull();
    expect(report.unavailable).toEqual({ nesting: expect.stringMatching(/^Nesting is not available on Citus: .*\.$/) });
    const text = await cliRun(['report']);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('Nesting is not available on Citus');
  });

  it('a second up changes nothing; a code refresh (another release) runs on Citus too', async () => {
    const second = await up(c, S);
    expect(second.applied).toEqual([]);
    expect(second.backfill.status).toBe('already activated');
    // As if other code were installed (a patch release): up re-applies the code layer, through the
    // topology check and one statement at a time.
    await q(`UPDATE ${S}.subagent_context_installed SET code_digest = 'another-release'`);
    const refreshed = await up(c, S);
    expect(refreshed).toMatchObject({ applied: [], upgraded: { to: PACKAGE_VERSION } });
    expect(await health()).toMatchObject({ status: 'stale', installed_version: PACKAGE_VERSION });
    await write('m-after', sessions[1], subagentMetadata({ tool_call_id: 'call-after', subagent: {} }));
    expect((await rows()).map((r) => r.tool_call_id)).toContain('call-after');
  });

  it('uninstall removes the workers\' counters too, and a new up works', async () => {
    const seqs = async () => (await q(
      `SELECT result FROM run_command_on_workers($$SELECT count(*) FROM pg_class WHERE relnamespace = '${S}'::regnamespace
          AND relname IN ('subagent_context_attempted_seq', 'subagent_context_skipped_no_identity_seq', 'subagent_context_persisted_seq',
                          'subagent_context_failed_seq', 'subagent_context_anomalous_value_seq', 'subagent_context_unknown_execution_seq')$$)
        ORDER BY nodeport`)).rows.map((r) => r.result);
    expect(await seqs()).toEqual(['6', '6']);
    // The shard move above left its source copy, with the trigger, until Citus's cleaner drops it.
    const pending = async () => (await q(`SELECT count(*)::int AS n FROM pg_dist_cleanup`)).rows[0].n as number;
    if (await pending() > 0) {
      const refused = await cliRun(['uninstall']);
      if (refused.code === 0 && await pending() === 0) {
        // Citus's own cleaner (every 15 s) dropped the source between the look and the uninstall's check.
        console.warn('citus/commands.test.ts: Citus dropped the moved shard\'s source as uninstall started; the refusal was not exercised');
      } else {
        expect(refused.code).not.toBe(0);
        expect(refused.stderr).toContain('run CALL citus_cleanup_orphaned_resources() on the coordinator, then uninstall again');
        expect(await seqs()).toEqual(['6', '6']);  // nothing was changed
      }
    } else {
      console.warn('citus/commands.test.ts: Citus had already dropped the moved shard\'s source; the uninstall refusal was not exercised');
    }
    await q(`CALL citus_cleanup_orphaned_resources()`);
    const u = await cliRun(['uninstall']);  // or, after the race above, "nothing to uninstall"
    expect(u.stderr).toBe('');
    expect(u.code).toBe(0);
    expect(await seqs()).toEqual(['0', '0']);
    const again = await up(c, S);
    expect(again.backfill.status).toBe('activated');
    expect(await health()).toMatchObject({ shortfall: 0n });
  });
});
