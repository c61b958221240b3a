// What `report` and the dashboard panels cost follows their window, not the history: on a store with
// 200,000 subagents outside the window and a handful in it, every windowed query reads
// task_session_subagents only for the rows of its window (EXPLAIN ANALYZE counts what each scan of the
// table returned and filtered away), whatever the history holds.
import { describe, it, expect } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn } from '../../kandev/host.js';
import { sqlFile } from '#sql';

const db = await freshDatabase('report_window_cost', { from: 'installed' });

/** Every windowed query of the report and the dashboards (the files taking $1/$2). */
const WINDOWED = [
  'report/identity.sql', 'report/running.sql', 'report/top.sql', 'report/trend-per-day.sql',
  'dashboards/overview.sql', 'dashboards/fanout-per-turn.sql', 'dashboards/sessions-and-cards.sql',
  'dashboards/subagents-per-session.sql', 'dashboards/usage.sql', 'dashboards/agent-status.sql',
  'dashboards/nesting.sql', 'dashboards/settlement.sql',
];

interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Actual Rows': number; 'Actual Loops': number;
  'Rows Removed by Filter'?: number; 'Rows Removed by Index Recheck'?: number; Plans?: PlanNode[] }

/** Rows each scan of `table` touched (returned or filtered away), over all its loops. */
function rowsRead(node: PlanNode, table: string): number {
  const own = node['Relation Name'] === table
    ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops'] : 0;
  return own + (node.Plans ?? []).reduce((sum, p) => sum + rowsRead(p, table), 0);
}

describe('the windowed queries read their window, not the history', () => {
  it('200,000 subagents before a window of 50: each query reads at most a few hundred rows of the table', async () => {
    const old = await createTurn(db.pool, 'public', 'history', '2098-01-01');
    const recent = await createTurn(db.pool, 'public', 'recent', '2099-06-01');
    // A year of history, one chain of nesting in each session's execution, and the window's 50 rows.
    await db.query(`INSERT INTO task_session_subagents (id, task_session_id, task_id, turn_id, tool_call_id, agent_execution_id,
                                                        parent_tool_call_id, observed_at, updated_at, settled_at)
                    SELECT 'h' || i, $1, $2, 'turn-h' || (i / 5), 'h' || i, 'e', CASE WHEN i % 5 > 0 THEN 'h' || (i - 1) END,
                           timestamp '2098-01-01' + make_interval(secs => i * 150), timestamp '2098-01-01', timestamp '2098-01-02'
                      FROM generate_series(1, 200000) AS i`, [old.session, old.task]);
    await db.query(`INSERT INTO task_session_subagents (id, task_session_id, task_id, turn_id, tool_call_id, agent_execution_id,
                                                        parent_tool_call_id, observed_at, updated_at)
                    SELECT 'w' || i, $1, $2, $3, 'w' || i, 'e', CASE WHEN i % 5 > 0 THEN 'w' || (i - 1) END,
                           timestamp '2099-06-01' + make_interval(secs => i), timestamp '2099-06-01'
                      FROM generate_series(1, 50) AS i`, [recent.session, recent.task, recent.turn]);
    // Sessions of the history, none started in the window.
    await db.query(`INSERT INTO task_sessions (id, task_id, started_at, updated_at)
                    SELECT 'old-' || i, $1, timestamp '2098-01-01', timestamp '2098-01-01' FROM generate_series(1, 2000) AS i`, [old.task]);
    await db.query('ANALYZE');
    const window = ['2099-06-01', '2099-06-02'];
    const read: Record<string, number> = {};
    for (const file of WINDOWED) {
      const { rows } = await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sqlFile(file, 'public')}`, window);
      read[file] = rowsRead(rows[0]['QUERY PLAN'][0].Plan, 'task_session_subagents');
    }
    console.log('rows of task_session_subagents read per query, window of 50 in 200,050:', read);
    for (const file of WINDOWED) expect(read[file], file).toBeLessThanOrEqual(500);

    // Over all time the trend still reads only its 90 days (the history's last months lie outside them).
    const { rows } = await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sqlFile('report/trend-per-day.sql', 'public')}`, [null, null]);
    expect(rowsRead(rows[0]['QUERY PLAN'][0].Plan, 'task_session_subagents')).toBeLessThanOrEqual(500);
  }, 300_000);
});
