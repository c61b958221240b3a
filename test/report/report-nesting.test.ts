// The nesting panel (sql/dashboards/nesting.sql), which `report` and Grafana run: each subagent of the
// window walks up to its parent by the unique key, so one session with tens of thousands of subagents
// costs seconds, not the minutes a search down from every root over the whole session costs; and its
// answers hold on the edges: a parent before the window, a parent never captured, a cycle, a chain
// deeper than the cap of 32.
import { describe, it, expect } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn } from '../../kandev/host.js';
import { sqlFile } from '#sql';

const db = await freshDatabase('report_nesting', { from: 'installed' });
const nesting = (since: string | null = null, until: string | null = null) =>
  db.query(sqlFile('dashboards/nesting.sql', 'public'), [since, until]).then((r) =>
    r.rows.map((x) => ({ depth: x.depth, subagents: Number(x.subagents) })));

/** Rows straight into the table: (tool call, parent, second observed) in one session and execution. */
async function subagents(session: { task: string; session: string }, execution: string, values: string) {
  await db.query(`INSERT INTO task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id,
                                                      parent_tool_call_id, observed_at, updated_at)
                  SELECT '${session.session}/' || tool_call_id, '${session.session}', '${session.task}', tool_call_id, '${execution}',
                         parent, timestamp '2099-01-01' + make_interval(secs => s), timestamp '2099-01-01' + make_interval(secs => s)
                    FROM (${values}) AS v(tool_call_id, parent, s)`);
}

describe('nesting', () => {
  it('keeps its meaning: depth from the agent, parents before the window, not captured, cycles and the cap', async () => {
    const t = await createTurn(db.pool, 'public', 'edges');
    await subagents(t, 'e1', `VALUES ('a', NULL, 0), ('b', 'a', 1), ('c', 'b', 2),   -- a chain: depths 0, 1, 2
                                     ('lost', 'gone', 3),                             -- its parent was never captured
                                     ('p', 'q', 4), ('q', 'p', 5)`);                  // a cycle
    // The same tool call id in another execution of the session is another subagent: 'c2' under 'a'
    // finds no 'a' in its own execution.
    await subagents(t, 'e2', `VALUES ('c2', 'a', 6)`);
    // A chain of 40: depths 0..32 are counted, the deeper 7 stop at the cap.
    await subagents(t, 'deep', `SELECT 'd' || i, CASE WHEN i > 0 THEN 'd' || (i - 1) END, 10 + i FROM generate_series(0, 39) AS i`);
    const counts = new Map<number | null, number>([[0, 2], [1, 1], [2, 1], [null, 4 + 7]]);
    for (let d = 1; d <= 32; d++) counts.set(d, (counts.get(d) ?? 0) + 1);
    expect(await nesting()).toEqual([...counts].filter(([d]) => d !== null).sort((x, y) => x[0]! - y[0]!)
      .map(([depth, subagents]) => ({ depth, subagents })).concat([{ depth: null, subagents: 11 }]));
    // Only 'c' in the window: its parents, observed before it, still give it depth 2.
    expect(await nesting('2099-01-01 00:00:02', '2099-01-01 00:00:03')).toEqual([{ depth: 2, subagents: 1 }]);
    await db.query(`DELETE FROM task_session_subagents`);
  });

  it('answers for one session of 50,000 subagents in seconds', async () => {
    // 10,000 launched by the agent, each with a chain of four below it, all in one session and execution.
    const t = await createTurn(db.pool, 'public', 'wide');
    await subagents(t, 'one', `SELECT 'c' || i || '.' || k, CASE WHEN k > 0 THEN 'c' || i || '.' || (k - 1) END, i % 3600
                                 FROM generate_series(1, 10000) AS i, generate_series(0, 4) AS k`);
    const started = performance.now();
    const rows = await nesting();
    const seconds = (performance.now() - started) / 1000;
    expect(rows).toEqual([0, 1, 2, 3, 4].map((depth) => ({ depth, subagents: 10_000 })));
    console.log(`nesting over 50,000 subagents of one session: ${seconds.toFixed(2)} s`);
    expect(seconds).toBeLessThan(10);
  }, 120_000);
});
