// Capture never makes a message write wait long on another one (docs/reliability.md#waits). Two messages of
// one (session, tool call) contend on our unique key: the second writer waits for the first one's
// transaction. A cancel by the host's statement_timeout is not an error capture can catch, so that wait
// is bounded by capture itself; it ends as a recorded failure and the message commits.
import { describe, expect, it } from 'vitest';
import { freshDatabase, type Notice } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';

const db = await freshDatabase('capture_wait', { from: 'installed' });

describe('a capture write that contends with an open transaction', () => {
  it('gives up well within the host statement_timeout, records a failure, and the message commits', async () => {
    const t = await createTurn(db.pool, 'public', 'wait');
    const a = await db.connect();
    const b = await db.connect();
    const notices: Notice[] = [];
    b.on('notice', (n) => notices.push(n));
    const frame = (status: string, description: string) =>
      subagentMetadata({ tool_call_id: 'toolu_k', status, subagent: { description } });

    await a.query('BEGIN');
    await insertMessage(a, 'public', { id: 'msg-a', session: t.session, task: t.task, turn: t.turn,
      metadata: frame('pending', 'from A'), created_at: '2026-08-12 09:00:01' });

    await b.query(`SET statement_timeout = '2s'`);
    const started = performance.now();
    await insertMessage(b, 'public', { id: 'msg-b', session: t.session, task: t.task, turn: t.turn,
      metadata: frame('in_progress', 'from B'), created_at: '2026-08-12 09:00:02' });
    const waited = performance.now() - started;
    expect(waited).toBeLessThan(1000);

    expect((await db.query(`SELECT id FROM task_session_messages WHERE id = 'msg-b'`)).rowCount).toBe(1);
    const { rows: failures } = await db.query(
      `SELECT task_session_id, tool_call_id, message_id, sqlstate FROM subagent_context_failures`);
    expect(failures).toEqual([{ task_session_id: t.session, tool_call_id: 'toolu_k', message_id: 'msg-b', sqlstate: '55P03' }]);
    expect(notices.map((n) => n.message)).toEqual([expect.stringMatching(/capture failed .*\(SQLSTATE 55P03\): canceling statement due to lock timeout/)]);
    // The bound is the function's own: the session's settings are as they were.
    expect((await b.query(`SELECT current_setting('lock_timeout') AS v`)).rows[0].v).toBe('0');

    await a.query('COMMIT');
    const { rows } = await db.query(`SELECT description, tool_status FROM task_session_subagents WHERE task_session_id = $1`, [t.session]);
    expect(rows).toEqual([{ description: 'from A', tool_status: 'pending' }]);
  });

  it('a host lock_timeout is left as the host set it after the capture', async () => {
    const c = await db.connect();
    const t = await createTurn(db.pool, 'public', 'host-setting');
    await c.query(`SET lock_timeout = '7s'`);
    await insertMessage(c, 'public', { id: 'msg-c', session: t.session, task: t.task, turn: t.turn,
      metadata: subagentMetadata({ tool_call_id: 'toolu_c', status: 'pending', subagent: {} }) });
    expect((await c.query(`SELECT current_setting('lock_timeout') AS v`)).rows[0].v).toBe('7s');
    expect((await db.query(`SELECT count(*)::int AS n FROM task_session_subagents WHERE task_session_id = $1`, [t.session])).rows[0].n).toBe(1);
  });
});
