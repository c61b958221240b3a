// History never duplicates (docs/health.md): the backfill and repair store no row for a (session, tool call)
// that already has a row under any execution id, and history rows take the execution id their
// metadata names. Every path that runs the backfill is tried: a first `up` over kandev's own table
// (kandev >= 0.89 writes it with real execution ids), uninstall then `up`, the bulk-load procedure
// (delete both keys, backfill), and repair.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createKandevSubagentTable, createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { backfill } from '../../src/install.js';
import { quoteIdent } from '#sql';
import { uninstallCommand } from '../../src/commands/uninstall.js';
import { utcTimestamp } from '../../src/timestamp.js';

const db = await freshDatabase('never_duplicates');
const pool = db.pool;

/** kandev >= 0.89's own table, holding two subagents under its real execution id, and their messages. */
async function kandevWroteTwo(schema: string) {
  await db.createHost(schema);
  const s = quoteIdent(schema);
  await createKandevSubagentTable(db.pool, schema);
  const t = await createTurn(pool, schema, 'k', '2026-08-01 08:00:00');
  for (const n of [1, 2]) {
    await insertMessage(pool, schema, { id: `msg-${n}`, session: t.session, task: t.task, turn: t.turn,
      created_at: `2026-08-01 08:0${n}:00`, metadata: subagentMetadata({ tool_call_id: `toolu_${n}`, status: 'completed',
        subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 150 } }) });
    await db.query(`INSERT INTO ${s}.task_session_subagents (id, task_session_id, task_id, turn_id, tool_call_id,
        agent_execution_id, total_tokens, tool_status, observed_at, updated_at)
      VALUES ($1, $2, $3, $4, $5, 'exec-real-1', 150, 'completed', $6, $6)`,
    [`kandev-${n}`, t.session, t.task, t.turn, `toolu_${n}`, `2026-08-01 08:0${n}:00`]);
  }
  return t;
}

async function truth(schema: string) {
  const { rows: [r] } = await db.query(
    `SELECT count(*)::int AS subagents, sum(total_tokens)::int AS tokens,
            array_agg(DISTINCT agent_execution_id) AS executions
       FROM ${quoteIdent(schema)}.task_session_subagents`);
  return r;
}

const TWO = { subagents: 2, tokens: 300, executions: ['exec-real-1'] };

describe("a first `up` over kandev's own table", async () => {
  await kandevWroteTwo('adopt');
  const result = await db.up('adopt');

  it('stores no second row under unknown: 2 subagents and 300 tokens, as kandev recorded', async () => {
    expect(result.backfill).toMatchObject({ status: 'activated', inserted: 0 });
    expect(await truth('adopt')).toEqual(TWO);
  });
});

describe('uninstall, then `up` again', async () => {
  await kandevWroteTwo('reinstall');
  await db.up('reinstall');
  expect(await uninstallCommand.run({ databaseUrl: db.url, schema: 'reinstall', json: false, verbose: false, args: {}, positionals: [] })).toBe(0);
  const result = await db.up('reinstall');

  it('still 2 subagents and 300 tokens', async () => {
    expect(result.backfill).toMatchObject({ status: 'activated', inserted: 0 });
    expect(await truth('reinstall')).toEqual(TWO);
  });
});

describe('the bulk-load procedure: delete both keys, backfill again', async () => {
  await kandevWroteTwo('bulk');
  await db.up('bulk');
  await db.query(`DELETE FROM bulk.kandev_meta WHERE key IN ('subagent_context_capture_since', 'subagent_context_backfill_through')`);
  const c = await db.connect();
  const result = await backfill(c, 'bulk');

  it('still 2 subagents and 300 tokens', async () => {
    expect(result).toMatchObject({ status: 'activated', inserted: 0 });
    expect(await truth('bulk')).toEqual(TWO);
  });
});

describe('repair', async () => {
  const t = await kandevWroteTwo('repair');
  await db.up('repair');
  // Written since activation by a writer whose triggers do not fire; one of them kandev recorded itself.
  const late = utcTimestamp(Date.now() + 60_000);
  const w = await db.connect();
  await w.query('SET session_replication_role = replica');
  for (const n of [3, 4]) {
    await insertMessage(w, 'repair', { id: `msg-${n}`, session: t.session, task: t.task, turn: t.turn, created_at: late,
      metadata: subagentMetadata({ tool_call_id: `toolu_${n}`, status: 'completed', agent_execution_id: n === 4 ? 'exec-real-2' : undefined,
        subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 150 } }) });
  }
  await db.query(`INSERT INTO repair.task_session_subagents (id, task_session_id, task_id, turn_id, tool_call_id,
      agent_execution_id, total_tokens, observed_at, updated_at)
    VALUES ('kandev-3', $1, $2, $3, 'toolu_3', 'exec-real-1', 150, $4, $4)`, [t.session, t.task, t.turn, late]);

  it("stores only the key that has no row, under the execution id its metadata names", async () => {
    const { rows: [r] } = await db.query(`SELECT repaired FROM repair.subagent_context_repair()`);
    expect(r.repaired).toBe(1n);
    const { rows } = await db.query(`SELECT tool_call_id, agent_execution_id, source FROM repair.task_session_subagents ORDER BY tool_call_id`);
    expect(rows).toEqual([
      { tool_call_id: 'toolu_1', agent_execution_id: 'exec-real-1', source: 'live' },
      { tool_call_id: 'toolu_2', agent_execution_id: 'exec-real-1', source: 'live' },
      { tool_call_id: 'toolu_3', agent_execution_id: 'exec-real-1', source: 'live' },
      { tool_call_id: 'toolu_4', agent_execution_id: 'exec-real-2', source: 'backfill' },
    ]);
    const { rows: [h] } = await db.query(`SELECT status, shortfall FROM repair.subagent_context_health()`);
    expect(h).toEqual({ status: 'healthy', shortfall: 0n });
  });
});
