// kandev after 0.91 (docs/integration.md, "kandev after 0.91"), on its tables (kandev/schema/kandev-0.92.sql):
// a message without a turn, a rewrite of the payload columns alone, and the periodic stale-turn sweep (kandev's
// bulk "complete the pending tool calls of a turn" UPDATE, run again and again). None of these needs new
// derivation; the tests pin what each does to our rows. On 4259581 there was no such fixture: the first
// test could not even be written there (turn_id was NOT NULL in every fixture).
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, subagentMetadata } from '../../kandev/host.js';
import { kandevStatements } from '../../kandev/traffic-write.js';

const S = 'k092';
const db = await freshDatabase('kandev_after_091');
await db.createHost(S, { shape: 'kandev-0.92' });
await db.up(S);

async function rowsOf(call: string) {
  return (await db.query(`SELECT * FROM ${S}.task_session_subagents WHERE tool_call_id = $1`, [call])).rows;
}
const failures = async () => Number((await db.query(`SELECT count(*) AS n FROM ${S}.subagent_context_failures`)).rows[0].n);

/** kandev's INSERT of a tool-call message, with an explicit turn (or none) and payload columns. */
async function insert(id: string, t: { session: string; task: string }, turn: string | null, metadata: string, at: string) {
  await db.query(`INSERT INTO ${S}.task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type,
      metadata, created_at, updated_at) VALUES ($1, $2, $3, $4, 'agent', '', 'tool_call', $5, $6, $6)`,
  [id, t.session, t.task, turn, metadata, at]);
}

const launch = { description: 'review the diff', subagent_type: 'security-reviewer', status: 'async_launched', is_async: true };

describe('kandev after 0.91', () => {
  it('a subagent message without a turn is captured with turn_id NULL, and a later turn fills it', async () => {
    const t = await createTurn(db.pool, S, 'noturn');
    await insert('msg-noturn', t, null, subagentMetadata({ tool_call_id: 'toolu_noturn', status: 'pending', subagent: launch }), '2026-08-12 09:00:00');
    const [row] = await rowsOf('toolu_noturn');
    expect(row).toMatchObject({ task_session_id: t.session, task_id: t.task, turn_id: null, tool_status: 'pending', agent_status: 'async_launched' });
    // kandev attaches the message to a turn later: the stored NULL is filled, nothing else moves.
    await db.query(`UPDATE ${S}.task_session_messages SET turn_id = $2 WHERE id = $1`, ['msg-noturn', t.turn]);
    expect(await rowsOf('toolu_noturn')).toEqual([{ ...row, turn_id: t.turn }]);
    expect(await failures()).toBe(0);
  });

  it('a payload-only rewrite (payload_digest and payload_size, metadata unchanged) leaves our row as it was', async () => {
    const t = await createTurn(db.pool, S, 'payload');
    const metadata = subagentMetadata({ tool_call_id: 'toolu_payload', status: 'in_progress', subagent: launch });
    await insert('msg-payload', t, t.turn, metadata, '2026-08-12 09:00:00');
    const before = await rowsOf('toolu_payload');
    // The capture trigger has no column list, so this UPDATE fires it (its WHEN reads metadata only):
    // the merge runs and stores the same values.
    await db.query(`UPDATE ${S}.task_session_messages SET payload_digest = $2, payload_size = $3 WHERE id = $1`,
      ['msg-payload', 'sha256:'.padEnd(71, 'a'), 65_536]);
    const { rows: [m] } = await db.query(`SELECT metadata, payload_size FROM ${S}.task_session_messages WHERE id = 'msg-payload'`);
    expect(m).toEqual({ metadata, payload_size: 65_536 });
    expect(await rowsOf('toolu_payload')).toEqual(before);
    expect(await failures()).toBe(0);
  });

  it("the periodic stale-turn sweep settles a pending call once (its clock, the session's time zone); repeating it changes nothing", async () => {
    const t = await createTurn(db.pool, S, 'sweep');
    await insert('msg-sweep', t, t.turn, subagentMetadata({ tool_call_id: 'toolu_sweep', status: 'pending', subagent: launch }), '2026-08-12 09:00:00');
    await insert('msg-done', t, t.turn, subagentMetadata({ tool_call_id: 'toolu_done', status: 'completed', subagent: { ...launch, status: 'completed' } }), '2026-08-12 09:00:00');
    const done = await rowsOf('toolu_done');
    const sweep = kandevStatements(S).completePending.text;
    const c = await db.connect();
    try {
      // kandev's session time zone is the server's; a non-UTC one shows where updated_at = CURRENT_TIMESTAMP lands.
      await c.query(`SET TimeZone = 'Asia/Tokyo'`);
      const { rows: [{ tokyo }] } = await c.query(`SELECT (CURRENT_TIMESTAMP AT TIME ZONE 'Asia/Tokyo') AS tokyo`);
      const first = await c.query(sweep, [t.turn]);
      expect(first.rowCount).toBe(1);
      const [settled] = await rowsOf('toolu_sweep');
      // jsonb_set rewrites the whole document in jsonb's canonical text ("kind": "subagent_task", with a
      // space): still a subagent frame, so the trigger fires and the merge settles the row with the
      // sweep's updated_at, which is the session's wall clock, not UTC.
      expect(settled).toMatchObject({ tool_status: 'complete', agent_status: 'async_launched' });
      expect(settled.settled_at).not.toBeNull();
      expect(settled.settled_at.slice(0, 13)).toBe(String(tokyo).slice(0, 13).replace('T', ' '));
      expect(settled.updated_at).toBe(settled.settled_at);
      // Every later run of the sweep: no message is pending any more, no row is touched, ours included.
      for (let i = 0; i < 3; i++) expect((await c.query(sweep, [t.turn])).rowCount).toBe(0);
      expect(await rowsOf('toolu_sweep')).toEqual([settled]);
      expect(await rowsOf('toolu_done')).toEqual(done);
      // A late frame from the agent after the sweep: the first settlement stands (tool_status, settled_at),
      // the child's own status and metrics fill in.
      await c.query(`UPDATE ${S}.task_session_messages SET metadata = $2, updated_at = $3 WHERE id = $1`, ['msg-sweep',
        subagentMetadata({ tool_call_id: 'toolu_sweep', status: 'completed', subagent: { ...launch, status: 'completed', total_tokens: 1200 } }),
        '2026-08-12 09:10:00']);
      expect((await rowsOf('toolu_sweep'))[0]).toMatchObject({
        tool_status: 'complete', settled_at: settled.settled_at, agent_status: 'completed', total_tokens: 1200n });
    } finally {
      await c.end();
    }
    expect(await failures()).toBe(0);
  });
});
