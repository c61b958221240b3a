// A real logical-replication subscriber (publisher and subscriber are two databases of one embedded
// server with wal_level = logical, of the suite's major). The apply worker writes with
// session_replication_role = replica, so the subscriber's capture trigger does not fire: health on the
// subscriber shows the shortfall, repair fixes it, and ENABLE ALWAYS makes the subscriber capture live.
// The simulated variants (SET session_replication_role, DISABLE TRIGGER ALL) are in
// replication-role.test.ts; the procedure is in docs/reliability.md.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { EmbeddedServer } from '../../demo/embedded.js';
import { createHostTables, createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { startOwnServer, urlFor } from '../helpers/database.js';
import { utcTimestamp } from '../../src/timestamp.js';

pg.types.setTypeParser(1114, (v: string) => v);
pg.types.setTypeParser(20, (v: string) => BigInt(v));

let server: EmbeddedServer;
const clients: pg.Client[] = [];
let pub: pg.Client;
let sub: pg.Client;

async function connect(database: string) {
  const c = new pg.Client(urlFor(server.url, database));
  c.on('error', () => {});
  await c.connect();
  clients.push(c);
  return c;
}

const utcNow = (offsetMs = 0) => utcTimestamp(Date.now() + offsetMs);

/** Waits until the subscriber has applied the final (completed) frame of every named call. */
async function applied(...keys: string[]) {
  for (let i = 0; i < 600; i++) {
    const { rows } = await sub.query(`SELECT count(*) AS n FROM task_session_messages
      WHERE id = ANY($1) AND metadata LIKE '%"completed"%'`, [keys.map((k) => `msg-${k}`)]);
    if (rows[0].n === BigInt(keys.length)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the subscriber did not apply ${keys.join(', ')}`);
}

/** One subagent call on the publisher: INSERT pending, UPDATE completed. */
async function call(key: string, tokens: number) {
  const t = await createTurn(pub, 'public', key, utcNow());
  await insertMessage(pub, 'public', { id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn,
    created_at: utcNow(2000), metadata: subagentMetadata({ tool_call_id: `toolu_${key}`, status: 'pending' }) });
  await updateMessage(pub, 'public', `msg-${key}`, subagentMetadata({
    tool_call_id: `toolu_${key}`, status: 'completed', subagent: { status: 'completed', total_tokens: tokens } }), utcNow(3000));
}

const rows = async (c: pg.Client) => (await c.query(
  `SELECT tool_call_id, source, total_tokens, tool_status FROM task_session_subagents ORDER BY tool_call_id`)).rows;

beforeAll(async () => {
  server = await startOwnServer(['-c', 'wal_level=logical']);
  const admin = await connect('postgres');
  await admin.query(`CREATE DATABASE publisher`);
  await admin.query(`CREATE DATABASE subscriber`);
  pub = await connect('publisher');
  sub = await connect('subscriber');
  for (const c of [pub, sub]) {
    await createHostTables(c, 'public');
    await up(c, 'public');
  }
  // kandev's tables are published; task_session_subagents is not (each side captures its own).
  await pub.query(`CREATE PUBLICATION kandev FOR TABLE tasks, task_sessions, task_session_turns, task_session_messages`);
  // Publisher and subscriber share a server, so the slot is made beforehand (CREATE SUBSCRIPTION
  // would otherwise wait for itself).
  await pub.query(`SELECT pg_create_logical_replication_slot('kandev_sub', 'pgoutput')`);
  const u = new URL(urlFor(server.url, 'publisher'));
  await sub.query(`CREATE SUBSCRIPTION kandev_sub
    CONNECTION 'host=127.0.0.1 port=${u.port} dbname=publisher user=postgres password=${decodeURIComponent(u.password)}'
    PUBLICATION kandev WITH (create_slot = false, slot_name = 'kandev_sub')`);
  // Each table first syncs on its own worker; until all are ready, a message can be applied before its
  // session (replica role skips the FK check), and a repair on the subscriber would then fail its FK.
  for (let tries = 0; ; tries++) {
    const { rows: [r] } = await sub.query(
      `SELECT count(*) FILTER (WHERE srsubstate <> 'r') AS pending, count(*) AS tables FROM pg_subscription_rel`);
    if (r.tables === 4n && r.pending === 0n) break;
    if (tries > 600) throw new Error('the subscription never finished its initial table sync');
    await new Promise((res) => setTimeout(res, 100));
  }
}, 180_000);

afterAll(async () => {
  await sub?.query(`DROP SUBSCRIPTION IF EXISTS kandev_sub`).catch(() => {});
  await Promise.all(clients.map((c) => c.end().catch(() => {})));
  await server?.stop();
});

describe('a logical-replication subscriber', () => {
  it('applies messages without capturing them; health shows the shortfall; repair fixes it', async () => {
    await call('a', 100);
    await call('b', 200);
    await applied('a', 'b');
    expect(await rows(pub)).toEqual([
      { tool_call_id: 'toolu_a', source: 'live', total_tokens: 100n, tool_status: 'completed' },
      { tool_call_id: 'toolu_b', source: 'live', total_tokens: 200n, tool_status: 'completed' }]);
    expect(await rows(sub)).toEqual([]);
    expect((await sub.query(`SELECT shortfall, trigger_enabled FROM subagent_context_health()`)).rows[0])
      .toEqual({ shortfall: 2n, trigger_enabled: true });
    expect((await sub.query(`SELECT repaired FROM subagent_context_repair()`)).rows[0].repaired).toBe(2n);
    expect(await rows(sub)).toEqual([
      { tool_call_id: 'toolu_a', source: 'backfill', total_tokens: 100n, tool_status: 'completed' },
      { tool_call_id: 'toolu_b', source: 'backfill', total_tokens: 200n, tool_status: 'completed' }]);
    expect((await sub.query(`SELECT shortfall FROM subagent_context_health()`)).rows[0].shortfall).toBe(0n);
  }, 120_000);

  it('with ENABLE ALWAYS on the subscriber, applied messages are captured live there', async () => {
    await sub.query(`ALTER TABLE task_session_messages ENABLE ALWAYS TRIGGER subagent_context_capture`);
    await call('c', 300);
    await applied('c');
    expect((await rows(sub)).find((r) => r.tool_call_id === 'toolu_c'))
      .toEqual({ tool_call_id: 'toolu_c', source: 'live', total_tokens: 300n, tool_status: 'completed' });
    expect((await sub.query(`SELECT shortfall, excess, trigger_enabled FROM subagent_context_health()`)).rows[0])
      .toEqual({ shortfall: 0n, excess: 0n, trigger_enabled: true });
  }, 120_000);
});
