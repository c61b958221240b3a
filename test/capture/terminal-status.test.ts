// docs/decisions.md#derivation: the terminal tool_status set is exact and case-sensitive, owned by one SQL function and
// pinned here to the TypeScript constant. Each candidate goes through the real trigger.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { TERMINAL_TOOL_STATUSES, isTerminalToolStatus } from '../../kandev/terminal-statuses.js';

const db = await freshDatabase('terminal_status', { from: 'installed' });
const pool = db.pool;

const NEAR_MISSES = [
  'COMPLETED', 'Completed', 'Complete', 'SUCCESS', 'Error', 'FAILED', 'Cancelled', 'canceled',
  'in_progress', 'pending', 'started', 'running', 'async_launched', 'done', 'finished', 'fail', 'errored',
  '', ' completed', 'complete ', 'cancelled ', 'success\n', '\tfailed', 'completed.', 'complete d', 'erro',
  'cancelledx', 'completed\u200b', 'ｃompleted',
];

describe('TERMINAL_TOOL_STATUSES', () => {
  it('is the six statuses of docs/decisions.md#derivation, in that order', () => {
    expect([...TERMINAL_TOOL_STATUSES]).toEqual(['complete', 'completed', 'success', 'error', 'failed', 'cancelled']);
  });

  it('agrees with subagent_context_is_terminal_status() value by value', async () => {
    const candidates = [...TERMINAL_TOOL_STATUSES, ...NEAR_MISSES];
    const { rows } = await db.query<{ status: string; terminal: boolean }>(
      `SELECT c AS status, subagent_context_is_terminal_status(c) AS terminal FROM unnest($1::text[]) AS c`, [candidates]);
    expect(rows.map((r) => [r.status, r.terminal])).toEqual(candidates.map((c) => [c, isTerminalToolStatus(c)]));
    expect(rows.filter((r) => r.terminal).map((r) => r.status)).toEqual([...TERMINAL_TOOL_STATUSES]);
    const { rows: [n] } = await db.query(`SELECT subagent_context_is_terminal_status(NULL) AS terminal`);
    expect(n.terminal).toBe(false);
  });

  it('the SQL function holds exactly these literals (no seventh value hidden outside the candidates)', async () => {
    // Read the set back out of the function body, so a value nobody thought to try is caught too.
    const { rows: [f] } = await db.query(
      `SELECT prosrc FROM pg_proc WHERE oid = 'subagent_context_is_terminal_status(text)'::regprocedure`);
    const literals = [...(f.prosrc as string).matchAll(/'([^']*)'/g)].map((m) => m[1]);
    expect(literals.sort()).toEqual([...TERMINAL_TOOL_STATUSES].sort());
  });
});

describe('settled_at through the trigger', () => {
  const cases = [
    ...TERMINAL_TOOL_STATUSES.map((s) => ({ status: s as string, terminal: true })),
    ...NEAR_MISSES.map((s) => ({ status: s, terminal: false })),
  ];

  it.each(cases.map((c, i) => ({ ...c, i })))('tool_status $status → settled: $terminal', async ({ status, terminal, i }) => {
    const t = await createTurn(pool, 'public', `k${i}`);
    const call = `toolu_terminal_${i}`;
    const id = `msg-terminal-${i}`;
    // First write not terminal, then the candidate status on an UPDATE, then one more frame.
    await insertMessage(pool, 'public', {
      id, session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:00:00',
      metadata: subagentMetadata({ tool_call_id: call, status: 'pending' }),
    });
    await updateMessage(pool, 'public', id, subagentMetadata({ tool_call_id: call, status }), '2026-08-12 09:00:01.5');
    await updateMessage(pool, 'public', id, subagentMetadata({ tool_call_id: call, status: 'in_progress' }), '2026-08-12 09:00:02');
    const { rows } = await db.query(
      `SELECT tool_status, settled_at, updated_at FROM task_session_subagents WHERE tool_call_id = $1`, [call]);
    expect(rows).toEqual([terminal
      ? { tool_status: status, settled_at: '2026-08-12 09:00:01.5', updated_at: '2026-08-12 09:00:02' }
      // A near-miss is stored verbatim ('' as NULL) and settles nothing; the later frame replaces it.
      : { tool_status: 'in_progress', settled_at: null, updated_at: '2026-08-12 09:00:02' }]);
  });

  it.each(NEAR_MISSES.filter((s) => s !== '').map((s, i) => ({ s, i })))(
    'near-miss $s is stored verbatim as tool_status', async ({ s, i }) => {
      const t = await createTurn(pool, 'public', `v${i}`);
      const call = `toolu_verbatim_${i}`;
      await insertMessage(pool, 'public', {
        id: `msg-verbatim-${i}`, session: t.session, task: t.task, turn: t.turn,
        metadata: subagentMetadata({ tool_call_id: call, status: s }),
      });
      const { rows } = await db.query(
        `SELECT tool_status, settled_at FROM task_session_subagents WHERE tool_call_id = $1`, [call]);
      expect(rows).toEqual([{ tool_status: s, settled_at: null }]);
    });
});
