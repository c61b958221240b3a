// Concurrent writers on separate connections (docs/decisions.md#merge-and-identity: "no read-then-write ... concurrent writers of one
// key give one row whatever the commit order, and writers of different keys never lose each other's rows").
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshDatabase, type Notice } from '../helpers/database.js';
import { createTurn, subagentMetadata, type SubagentFrame } from '../../kandev/host.js';
import { seededRandom } from '../../kandev/random.js';

const db = await freshDatabase('concurrency', { from: 'installed' });

const writers: pg.Client[] = [];
for (let i = 0; i < 16; i++) writers.push(await db.connect());

type Stats = Record<'attempted' | 'skipped_no_identity' | 'persisted' | 'failed' | 'anomalous_value' | 'unknown_execution', bigint>;
const stats = async (): Promise<Stats> => (await db.query<Stats>('SELECT * FROM subagent_context_stats()')).rows[0];
const delta = (a: Stats, b: Stats) =>
  Object.fromEntries(Object.keys(b).map((k) => [k, Number(b[k as keyof Stats] - a[k as keyof Stats])]));

const INSERT = `INSERT INTO task_session_messages
  (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
  VALUES ($1, $2, $3, $4, 'agent', '', 'tool_call', $5, $6, $7)`;
const UPDATE = `UPDATE task_session_messages SET metadata = $2, updated_at = $3 WHERE id = $1`;

const rowsOf = async (session: string) =>
  (await db.query(`SELECT * FROM task_session_subagents WHERE task_session_id = $1 ORDER BY tool_call_id`, [session])).rows
    .map(({ id, ...rest }) => rest);

const prng = seededRandom;

const at = (second: number) => `2026-08-12 10:00:${String(second).padStart(2, '0')}`;

// Each of 8 writers contributes a distinct column, so a lost update would show as a missing value.
const CONTRIBUTION: Array<{ sub: Record<string, unknown>; parent?: string }> = [
  { sub: { description: 'd0' } },
  { sub: { subagent_type: 't1' } },
  { sub: { agent_id: 'a2' } },
  { sub: { child_session_id: 'c3', is_async: true } },
  { sub: { model: 'm4' } },
  { sub: { status: 'running' } },
  { sub: { total_tokens: 600, duration_ms: 6000 } },
  { sub: { tool_use_count: 7 }, parent: 'toolu_parent7' },
];
const MERGED = {
  description: 'd0', subagent_type: 't1', agent_id: 'a2', child_session_id: 'c3', is_async: 1, model: 'm4',
  agent_status: 'running', total_tokens: 600n, duration_ms: 6000n, tool_use_count: 7n, parent_tool_call_id: 'toolu_parent7',
};

describe('eight writers, one key', () => {
  it('each with its own message row: every write commits, one row, nothing lost', async () => {
    const t = await createTurn(db.pool, 'public', 'one-own');
    const before = await stats();
    await Promise.all(writers.slice(0, 8).map(async (c, i) => {
      const c8 = CONTRIBUTION[i];
      const frame = (status: string, extra: Record<string, unknown>): SubagentFrame =>
        ({ tool_call_id: 'toolu_shared', status, parent_tool_call_id: c8.parent, subagent: { ...c8.sub, ...extra } });
      await c.query('BEGIN');
      // Every message has the same created_at, so observed_at does not depend on who commits first.
      await c.query(INSERT, [`own-${i}`, t.session, t.task, t.turn, subagentMetadata(frame('pending', {})), at(0), at(i)]);
      await c.query(UPDATE, [`own-${i}`, subagentMetadata(frame('in_progress', {})), at(10 + i)]);
      await c.query('COMMIT');
    }));
    expect(delta(before, await stats())).toEqual({
      attempted: 16, skipped_no_identity: 0, persisted: 16, failed: 0, anomalous_value: 0, unknown_execution: 16,
    });
    const { rows: msgs } = await db.query(`SELECT id, updated_at FROM task_session_messages WHERE turn_id = $1 ORDER BY id`, [t.turn]);
    expect(msgs).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ id: `own-${i}`, updated_at: at(10 + i) })));
    expect(await rowsOf(t.session)).toEqual([{
      task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: 'toolu_shared',
      agent_execution_id: 'unknown', ...MERGED, tool_status: 'in_progress', source: 'live',
      observed_at: at(0), settled_at: null, updated_at: at(17),
    }]);
  });

  it('all updating the same message row after settlement: tool_status stays, updated_at never goes back', async () => {
    const t = await createTurn(db.pool, 'public', 'one-same');
    await db.query(INSERT, ['same', t.session, t.task, t.turn,
      subagentMetadata({ tool_call_id: 'toolu_same', status: 'completed', subagent: { total_tokens: 1 } }), at(0), at(30)]);
    const before = await stats();
    const late = ['failed', 'in_progress', 'error', 'pending', 'cancelled', 'success', 'failed', 'in_progress'];
    const docs: Record<string, string> = {};
    await Promise.all(writers.slice(0, 8).map(async (c, i) => {
      const c8 = CONTRIBUTION[i];
      const doc = (n: number) => subagentMetadata({
        tool_call_id: 'toolu_same', status: late[i], parent_tool_call_id: c8.parent,
        subagent: n === 1 ? { ...c8.sub } : { ...c8.sub, is_async: i === 3 ? true : false } });
      // Writer 0 writes older times than the settled frame: updated_at must not move back.
      const time = (n: number) => (i === 0 ? at(20 + n) : at(31 + i * 2 + n));
      await c.query('BEGIN');
      await c.query(UPDATE, ['same', doc(0), time(0)]);
      await c.query(UPDATE, ['same', doc(1), time(1)]);
      await c.query('COMMIT');
      docs[time(1)] = doc(1);
    }));
    expect(delta(before, await stats())).toEqual({
      attempted: 16, skipped_no_identity: 0, persisted: 16, failed: 0, anomalous_value: 0, unknown_execution: 16,
    });
    // The message holds the last committed frame: its metadata and updated_at come from the same writer.
    const { rows: [msg] } = await db.query(`SELECT metadata, updated_at FROM task_session_messages WHERE id = 'same'`);
    expect(msg.metadata).toBe(docs[msg.updated_at]);
    const [row] = await rowsOf(t.session);
    expect(row).toEqual({
      task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: 'toolu_same',
      agent_execution_id: 'unknown', ...MERGED, total_tokens: 600n, tool_status: 'completed', source: 'live',
      observed_at: at(0), settled_at: at(30), updated_at: at(46),
    });
  });
});

describe('fan-out: distinct keys written at once', () => {
  for (const n of [3, 4, 5, 8]) {
    it(`${n} subagents of one turn on ${n} connections: all ${n} rows`, async () => {
      const t = await createTurn(db.pool, 'public', `fan-${n}`);
      await Promise.all(writers.slice(0, n).map(async (c, k) => {
        const id = `fan${n}-${k}`;
        await c.query('BEGIN');
        await c.query(INSERT, [id, t.session, t.task, t.turn, subagentMetadata({
          tool_call_id: `toolu_fan${n}_${k}`, status: 'pending',
          subagent: { subagent_type: `type-${k}`, status: 'async_launched', is_async: true } }), at(0), at(0)]);
        await c.query(UPDATE, [id, subagentMetadata({
          tool_call_id: `toolu_fan${n}_${k}`, status: 'completed',
          subagent: { subagent_type: `type-${k}`, status: 'completed', total_tokens: 1000 + k, tool_use_count: k } }), at(5 + k)]);
        await c.query('COMMIT');
      }));
      expect(await rowsOf(t.session)).toEqual(Array.from({ length: n }, (_, k) => ({
        task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: `toolu_fan${n}_${k}`,
        agent_execution_id: 'unknown', parent_tool_call_id: null, subagent_type: `type-${k}`, description: null,
        agent_id: null, child_session_id: null, model: null, agent_status: 'completed', tool_status: 'completed',
        is_async: 1, total_tokens: BigInt(1000 + k), tool_use_count: BigInt(k), duration_ms: null, source: 'live',
        observed_at: at(0), settled_at: at(5 + k), updated_at: at(5 + k),
      })));
    });
  }
});

describe('sixteen writers, mixed frames, seeded interleaving', () => {
  for (const seed of [20260812, 7, 31337]) it(`seed ${seed}: one row per key, no error reaches a writer, stats add up, no failures`, async () => {
    const p = `mix${seed}`;
    const rand = prng(seed);
    const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
    const sessions = await Promise.all([0, 1, 2, 3, 4, 5].map((s) => createTurn(db.pool, 'public', `${p}-${s}`)));

    // A call = one message row owned by one writer: a launch INSERT, then 2–3 UPDATEs. A shared key is
    // written through two message rows by two writers (as when kandev rewrites a call under a new
    // message); each of those writers contributes different columns.
    interface Op { sql: string; params: unknown[]; qualifies: boolean; identity: boolean; key?: string; shared: boolean }
    interface Call { writer: number; ops: Op[] }
    const calls: Call[] = [];
    const expected = new Map<string, Record<string, unknown>>();
    let seq = 0;
    const time = () => `2026-08-12 11:${String(Math.floor(seq / 60)).padStart(2, '0')}:${String(seq++ % 60).padStart(2, '0')}`;

    for (let k = 0; k < 40; k++) {
      const s = sessions[k % sessions.length];
      const key = `toolu_${p}_${String(k).padStart(2, '0')}`;
      const shared = k % 5 === 0;
      const noIdentity = k % 13 === 7;
      const owners = shared ? [k % 16, (k + 5) % 16] : [Math.floor(rand() * 16)];
      const created = time();
      let lastUpdated = created;
      owners.forEach((writer, part) => {
        const msg = `${p}-${k}-${part}`;
        const tc = noIdentity ? '' : key;
        const launchQualifies = rand() < 0.6;
        const ops: Op[] = [];
        const meta = (status: string, sub: Record<string, unknown>, kind = 'subagent_task') =>
          JSON.stringify({ tool_call_id: tc, status, title: 'Task', normalized: { kind, subagent_task: sub } });
        const own = shared ? (part === 0 ? { description: `desc-${k}` } : { model: `model-${k}` }) : { description: `desc-${k}` };
        const updates = 2 + Math.floor(rand() * 2);
        ops.push({ sql: INSERT, params: [msg, s.session, s.task, s.turn, meta(shared ? 'in_progress' : 'pending', own, launchQualifies ? 'subagent_task' : 'generic'), created, created],
          qualifies: launchQualifies, identity: !noIdentity, key, shared });
        for (let u = 0; u < updates; u++) {
          const t = time();
          lastUpdated = t > lastUpdated ? t : lastUpdated;
          const last = u === updates - 1;
          const sub = { ...own, subagent_type: `type-${k}`, ...(last && !shared ? { total_tokens: 100 + k, tool_use_count: u } : {}) };
          ops.push({ sql: UPDATE, params: [msg, meta(shared ? 'in_progress' : last ? 'completed' : 'in_progress', sub), t],
            qualifies: true, identity: !noIdentity, key, shared });
        }
        calls.push({ writer, ops });
        if (!noIdentity) {
          const e = expected.get(key) ?? {
            task_session_id: s.session, task_id: s.task, turn_id: s.turn, tool_call_id: key, agent_execution_id: 'unknown',
            parent_tool_call_id: null, subagent_type: `type-${k}`, description: null, agent_id: null, child_session_id: null,
            model: null, agent_status: null, tool_status: 'in_progress', is_async: 0, total_tokens: null, tool_use_count: null,
            duration_ms: null, source: 'live', observed_at: created, settled_at: null, updated_at: null,
          };
          Object.assign(e, own);
          if (!shared) {
            const [, , lastAt] = ops[ops.length - 1].params as string[];
            Object.assign(e, { tool_status: 'completed', total_tokens: BigInt(100 + k), tool_use_count: BigInt(updates - 1), settled_at: lastAt });
          }
          e.updated_at = lastUpdated;
          expected.set(key, e);
        }
      });
    }

    // Per writer: its calls' frames interleaved at random (each call's own order kept), grouped into
    // transactions of 1–4 writes. A transaction touches at most one shared key, so transactions cannot
    // wait on each other in a cycle (the forced deadlock below shows what happens when they do).
    const plans: Op[][][] = Array.from({ length: 16 }, () => []);
    for (let w = 0; w < 16; w++) {
      const queues = calls.filter((c) => c.writer === w).map((c) => [...c.ops]);
      const flat: Op[] = [];
      while (queues.some((q) => q.length)) flat.push(pick(queues.filter((q) => q.length)).shift()!);
      let tx: Op[] = [];
      let sharedInTx = false;
      for (const op of flat) {
        if (tx.length >= 1 + Math.floor(rand() * 4) || (op.shared && sharedInTx)) { plans[w].push(tx); tx = []; sharedInTx = false; }
        tx.push(op);
        sharedInTx ||= op.shared;
      }
      if (tx.length) plans[w].push(tx);
    }
    const all = plans.flat(2);
    const qualifying = all.filter((o) => o.qualifies);
    const withIdentity = qualifying.filter((o) => o.identity);
    expect(calls.length).toBe(48);                       // 40 keys, 8 of them written through two messages
    expect(qualifying.length).toBeGreaterThan(120);
    expect(plans.filter((tx) => tx.length > 0).length).toBeGreaterThanOrEqual(12);

    const before = await stats();
    const failuresBefore = Number((await db.query('SELECT count(*) FROM subagent_context_failures')).rows[0].count);
    const warnings: string[] = [];
    const onNotice = (n: Notice) => { if (n.severity === 'WARNING') warnings.push(n.message ?? ''); };
    writers.forEach((c) => c.on('notice', onNotice));
    const outcomes = await Promise.allSettled(writers.map(async (c, w) => {
      for (const tx of plans[w]) {
        await c.query('BEGIN');
        for (const op of tx) {
          await c.query(op.sql, op.params);
          if (rand() < 0.3) await new Promise((r) => setImmediate(r));
        }
        await c.query('COMMIT');
      }
    }));
    writers.forEach((c) => c.off('notice', onNotice));
    expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([]);
    expect(warnings).toEqual([]);

    const d = delta(before, await stats());
    expect(d).toEqual({
      attempted: qualifying.length, skipped_no_identity: qualifying.length - withIdentity.length,
      persisted: withIdentity.length, failed: 0, anomalous_value: 0, unknown_execution: withIdentity.length,
    });
    expect(d.attempted).toBe(d.skipped_no_identity + d.persisted + d.failed);
    expect(failuresBefore).toBe(0);
    expect(Number((await db.query('SELECT count(*) FROM subagent_context_failures')).rows[0].count)).toBe(0);
    expect(Number((await db.query(`SELECT count(*) FROM task_session_messages WHERE id LIKE $1`, [`${p}-%`])).rows[0].count))
      .toBe(calls.length);

    const { rows } = await db.query(
      `SELECT * FROM task_session_subagents WHERE tool_call_id LIKE $1 ORDER BY tool_call_id`, [`toolu_${p}_%`]);
    const got = rows.map(({ id, ...r }) => r);
    expect(got.map((r) => r.tool_call_id)).toEqual([...expected.keys()].sort());
    expect(got).toEqual([...expected.keys()].sort().map((k) => expected.get(k)));
  });
});

describe('a forced deadlock inside capture', () => {
  it('is caught: both message transactions commit, the victim frame is logged as 40P01', async () => {
    const t = await createTurn(db.pool, 'public', 'deadlock');
    const meta = (key: string, sub: Record<string, unknown>) =>
      subagentMetadata({ tool_call_id: key, status: 'in_progress', subagent: sub });
    // Two message rows per key (K1: m1, m4; K2: m2, m3), so the host rows never conflict: only capture's
    // upserts of the two subagent rows can wait on each other.
    for (const [id, key] of [['m1', 'toolu_K1'], ['m2', 'toolu_K2'], ['m3', 'toolu_K2'], ['m4', 'toolu_K1']]) {
      await db.query(INSERT, [`dl-${id}`, t.session, t.task, t.turn, meta(key, {}), at(0), at(0)]);
    }
    const [c1, c2] = [writers[0], writers[1]];
    const notices: Array<{ client: number; message: string }> = [];
    const l1 = (n: Notice) => n.severity === 'WARNING' && notices.push({ client: 1, message: n.message ?? '' });
    const l2 = (n: Notice) => n.severity === 'WARNING' && notices.push({ client: 2, message: n.message ?? '' });
    c1.on('notice', l1);
    c2.on('notice', l2);
    const before = await stats();
    for (const c of [c1, c2]) await c.query(`BEGIN; SET LOCAL deadlock_timeout = '50ms'`);
    await c1.query(UPDATE, ['dl-m1', meta('toolu_K1', { model: 'from-m1' }), at(1)]);
    await c2.query(UPDATE, ['dl-m2', meta('toolu_K2', { model: 'from-m2' }), at(2)]);
    const p1 = c1.query(UPDATE, ['dl-m3', meta('toolu_K2', { agent_id: 'from-m3' }), at(3)]).then(() => 1);
    const p2 = c2.query(UPDATE, ['dl-m4', meta('toolu_K1', { agent_id: 'from-m4' }), at(4)]).then(() => 2);
    // The victim's write returns (capture failed, caught); the other still waits for the victim's locks.
    const victim = await Promise.race([p1, p2]);
    await (victim === 1 ? c1 : c2).query('COMMIT');
    await (victim === 1 ? p2 : p1);
    await (victim === 1 ? c2 : c1).query('COMMIT');
    c1.off('notice', l1);
    c2.off('notice', l2);

    const victimMessage = victim === 1 ? 'dl-m3' : 'dl-m4';
    const victimKey = victim === 1 ? 'toolu_K2' : 'toolu_K1';
    expect(delta(before, await stats())).toEqual({
      attempted: 4, skipped_no_identity: 0, persisted: 3, failed: 1, anomalous_value: 0, unknown_execution: 3,
    });
    const { rows: failures } = await db.query(
      `SELECT task_session_id, tool_call_id, message_id, agent_execution_id, sqlstate FROM subagent_context_failures
        WHERE message_id LIKE 'dl-%'`);
    expect(failures).toEqual([{ task_session_id: t.session, tool_call_id: victimKey, message_id: victimMessage,
      agent_execution_id: 'unknown', sqlstate: '40P01' }]);
    expect(notices).toHaveLength(1);
    expect(notices[0].client).toBe(victim);
    expect(notices[0].message).toContain(`session ${t.session}, tool call ${victimKey} (SQLSTATE 40P01)`);
    // Every message write committed with its metadata; the victim's frame is the only one not captured.
    const { rows: msgs } = await db.query(`SELECT id, metadata FROM task_session_messages WHERE id LIKE 'dl-%' ORDER BY id`);
    expect(msgs.map((m) => JSON.parse(m.metadata).normalized.subagent_task)).toEqual([
      { model: 'from-m1' }, { model: 'from-m2' }, { agent_id: 'from-m3' }, { agent_id: 'from-m4' }]);
    const rows = await rowsOf(t.session);
    expect(rows.map((r) => [r.tool_call_id, r.model, r.agent_id])).toEqual([
      ['toolu_K1', 'from-m1', victim === 2 ? null : 'from-m4'],
      ['toolu_K2', 'from-m2', victim === 1 ? null : 'from-m3'],
    ]);
  });
});
