// Issue 9, target 1: kandev's non-subagent writes (every tool kind with Go-escaped payloads, streamed
// text, permission requests, the bulk completion, deletes) call no function of the installation and add
// no entry to health's index on task_session_messages. One transaction with track_functions = 'all'
// counts the installation's function calls; pageinspect counts the index's entries (live and dead, so
// an entry added for an intermediate row version counts too). A subagent write in the same
// transaction moves both, so the test can fail.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { planTraffic, TOOL_KINDS, type Write } from '../../kandev/traffic-plan.js';
import { executeWrite, createSessionRows, createTurnRow } from '../../kandev/traffic-write.js';

const db = await freshDatabase('non_subagent_writes');
await db.createHost();
await db.up();

describe('non-subagent kandev writes', () => {
  it('call no function of the installation and add no entry to its index; a subagent write does both', async () => {
    const c = await db.connect();
    await c.query('CREATE SCHEMA inspect');
    await c.query('CREATE EXTENSION pageinspect SCHEMA inspect');
    const { rows: [index] } = await c.query(`SELECT i.indexrelid::regclass::text AS name FROM pg_index i
        JOIN pg_class r ON r.oid = i.indexrelid
       WHERE i.indrelid = 'public.task_session_messages'::regclass AND r.relname LIKE 'subagent\\_context\\_%'`);
    expect(index?.name).toBeDefined();
    const calls = async () => Number((await c.query(`SELECT coalesce(sum(pg_stat_get_xact_function_calls(p.oid)), 0) AS n
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace`)).rows[0].n);
    const entries = async () => Number((await c.query(`SELECT coalesce(sum(s.live_items + s.dead_items), 0) AS n
        FROM generate_series(1, (pg_relation_size($1::regclass) / current_setting('block_size')::int - 1)::int) AS b,
             inspect.bt_page_stats($1::text, b::bigint) AS s WHERE s.type = 'l'`, [index.name])).rows[0].n);

    const plan = planTraffic({ invalidJson: false, seed: 9 });
    const session = plan.sessions.find((s) => !s.history && s.turns.some((t) => t.subagents.length > 0))!;
    const other = session.turns.flatMap((t) => t.writes.filter((w) => w.class !== 'subagent' && w.class !== 'odd').map((w) => [t, w] as const));
    // Every write of the session's first subagent call (its insert may still be of another kind).
    const first = session.turns.flatMap((t) => t.writes).find((w) => w.class === 'subagent' && w.op === 'insert')!;
    const subagent = session.turns.flatMap((t) => t.writes.filter((w) => 'message' in w && 'message' in first && w.message === first.message).map((w) => [t, w] as const));
    expect(subagent.some(([, w]) => w.qualifies)).toBe(true);
    // The writes are the mix the target names: every tool kind, Go's HTML escapes, text, permission
    // requests, the bulk completion and a delete.
    const text = other.map(([, w]) => ('metadata' in w ? w.metadata ?? '' : '')).join('\n');
    for (const kind of TOOL_KINDS) expect(text).toContain(`"kind":"${kind}"`);
    for (const escape of ['\\u003c', '\\u003e', '\\u0026']) expect(text).toContain(escape);
    const classes = new Set(other.map(([, w]) => w.class));
    expect([...classes].sort()).toEqual(['bulk', 'delete', 'permission', 'prompt', 'text', 'tool']);

    await c.query('BEGIN');
    await c.query(`SET LOCAL track_functions = 'all'`);
    await createSessionRows(c, 'public', session, null);
    for (const t of session.turns) await createTurnRow(c, 'public', session, t, null);
    const entries0 = await entries();
    const run = async (writes: (readonly [typeof session.turns[number], Write])[]) => {
      for (const [t, w] of writes) await executeWrite(c, w, { schema: 'public', session: session.session, task: session.task, turn: t.id, inTransaction: true });
    };
    await run(other);
    const bulk = await c.query(`SELECT count(*)::int AS n FROM task_session_messages WHERE metadata LIKE '%"status": "complete"%'`);
    expect(bulk.rows[0].n).toBeGreaterThan(0); // the bulk completion did rewrite rows
    expect(await calls()).toBe(0);
    expect(await entries()).toBe(entries0);

    await run(subagent);
    expect(await calls()).toBeGreaterThan(0);
    expect(await entries()).toBeGreaterThan(entries0);
    await c.query('ROLLBACK');
  });
});
