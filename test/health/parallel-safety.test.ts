// The parsers that catch errors (plpgsql EXCEPTION blocks) open subtransactions, which PostgreSQL
// forbids while a parallel query runs ("cannot start subtransactions during a parallel operation").
// They are declared PARALLEL UNSAFE so that a query an operator or a dashboard writes over them (the
// history, health and missing-keys queries of docs/health.md) is never planned in parallel. Here the
// planner is pushed hard towards parallel plans; every query must still answer, hostile nesting included.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { HISTORY_ROWS } from '../../kandev/subagent-row.js';

const db = await freshDatabase('parallel_safety', { from: 'installed' });

const c = await db.connect();
const t = await createTurn(c, 'public', 'p');
for (let i = 0; i < 200; i++) {
  await insertMessage(c, 'public', { id: `m${i}`, session: t.session, task: t.task, turn: t.turn,
    created_at: '2099-01-01 00:00:00',
    metadata: subagentMetadata({ tool_call_id: `toolu_${i}`, status: 'pending', subagent: { status: 'async_launched' } }) });
}
// Bracket-heavy text goes through the catching parser on every major (code/parse.sql).
await insertMessage(c, 'public', { id: 'deep', session: t.session, task: t.task, turn: t.turn,
  created_at: '2099-01-01 00:00:00', metadata: '{"normalized":{"kind":"subagent_task"},"x":' + '['.repeat(3000) + ']'.repeat(3000) + '}' });
await c.query(`SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
               SET max_parallel_workers_per_gather = 2`);

describe('catching parsers never run in a parallel plan', () => {
  it('they are declared PARALLEL UNSAFE', async () => {
    const { rows } = await c.query(`SELECT proname, proparallel FROM pg_proc
      WHERE proname IN ('subagent_context_parse_metadata_guarded', 'subagent_context_parse_metadata', 'subagent_context_parse_key')
      ORDER BY proname`);
    expect(rows).toEqual([
      { proname: 'subagent_context_parse_key', proparallel: 'u' },
      { proname: 'subagent_context_parse_metadata', proparallel: 'u' },
      { proname: 'subagent_context_parse_metadata_guarded', proparallel: 'u' },
    ]);
  });

  it('a query over every message with the history parser answers', async () => {
    const { rows } = await c.query(
      `SELECT count(*)::int AS parsed FROM task_session_messages WHERE subagent_context_parse_metadata(metadata) IS NOT NULL`);
    expect(rows[0].parsed).toBe(201);
  });

  it("health's comparison, history rows and the missing-keys query answer", async () => {
    expect((await c.query(`SELECT count(*)::int AS n FROM subagent_context_compare('-infinity', '-infinity', 'infinity')`)).rows[0].n)
      .toBe(0);
    expect((await c.query(`SELECT count(*)::int AS n FROM ${HISTORY_ROWS} AS h`)).rows[0].n).toBe(200);
    expect((await c.query(`SELECT subagent_context_store_history('-infinity', 'infinity', NULL, NULL, NULL) AS n`)).rows[0].n).toBe(0n);
  });
});
