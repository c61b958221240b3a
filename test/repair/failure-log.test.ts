// The failure log stays bounded and says why (docs/reliability.md#failure-log): one open row per message
// however many of its frames fail, a failure no replay can fix is classified once with its reason and not
// retried, and `repair` says in words and in --json what stays. A document larger than
// subagent_context.capture_max_bytes is not parsed inside kandev's write: its capture is recorded as
// deferred and `repair` stores its row (docs/reliability.md#large-documents). On 4259581 every frame added a
// row (3 here), every repair tried the too-long key again and said "a row … exists … reused tool_call_id",
// and a 100 MB frame was parsed inside kandev's write.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { storedAndDerived } from '../helpers/stored-and-derived.js';
import { quoteIdent } from '#sql';

const db = await freshDatabase('failure_log');
const cli = builtCli();
const q = async (sql: string, values?: unknown[]) => (await db.query(sql, values)).rows;

const health = async (schema: string) =>
  (await q(`SELECT shortfall::int, failures::int, status FROM ${quoteIdent(schema)}.subagent_context_health()`))[0];

describe('a call whose key no index can hold, and a message that stopped qualifying', async () => {
  await db.createHost('poison');
  await db.up('poison');
  const t = await createTurn(db.pool, 'poison', 'poison');
  // 3.2 kB of incompressible text: kandev's own indexes take it, the unique key of our table cannot (54000).
  const execution = randomBytes(2400).toString('base64');
  const big = (status: string, tokens: number) =>
    subagentMetadata({ tool_call_id: 'toolu_big', agent_execution_id: execution, status, subagent: { status: 'running', total_tokens: tokens } });

  it('records one failure row per message however many frames fail, counting them', async () => {
    await insertMessage(db.pool, 'poison', { id: 'big', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:01',
      metadata: big('pending', 1) });
    await updateMessage(db.pool, 'poison', 'big', big('in_progress', 2), '2099-01-01 00:00:02');
    await updateMessage(db.pool, 'poison', 'big', big('in_progress', 3), '2099-01-01 00:00:03');
    expect(await q(`SELECT message_id, sqlstate, occurrences, last_occurred_at > occurred_at AS later, stays_because
                      FROM poison.subagent_context_failures`))
      .toEqual([{ message_id: 'big', sqlstate: '54000', occurrences: 3, later: true, stays_because: null }]);
    expect(await health('poison')).toMatchObject({ shortfall: 1, failures: 1 });
  });

  it('repair classifies it once, says why in words and in --json, and the next repair does not retry it', async () => {
    // A second call fails (its row held), then its message is rewritten as something else, uncaptured.
    await insertMessage(db.pool, 'poison', { id: 'gone', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:04',
      metadata: subagentMetadata({ tool_call_id: 'toolu_gone', status: 'pending' }) });
    const locker = await db.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT 1 FROM poison.task_session_subagents WHERE tool_call_id = 'toolu_gone' FOR UPDATE`);
    await updateMessage(db.pool, 'poison', 'gone', subagentMetadata({ tool_call_id: 'toolu_gone', status: 'in_progress' }), '2099-01-01 00:00:05');
    await locker.query('COMMIT');
    await locker.end();
    const writer = await db.connect();
    await writer.query('SET session_replication_role = replica');
    await updateMessage(writer, 'poison', 'gone', '{"kind":"text"}', '2099-01-01 00:00:06');
    await writer.end();
    expect(await health('poison')).toMatchObject({ failures: 2 });

    const human = await runCli(cli, ['repair', '--schema', 'poison'], { DATABASE_URL: db.url, NO_COLOR: '1' });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toBe('compared 0 subagent messages, stored 0 missing rows, replayed 1 failed capture; still missing 1\n' +
      '1 failed capture can never be replayed: 1 whose key (session, execution and tool call ids) is too long for the unique index; ' +
      'they are kept in subagent_context_failures with stays_because and not retried. See docs/reliability.md#failure-log.\n' +
      '1 still missing because its key is too long for the unique index: no row can be stored for them. See docs/reliability.md#failure-log.\n');
    expect(await q(`SELECT message_id, stays_because, replayed_at IS NOT NULL AS replayed FROM poison.subagent_context_failures ORDER BY message_id`))
      .toEqual([{ message_id: 'big', stays_because: 'key_too_long', replayed: false }, { message_id: 'gone', stays_because: null, replayed: true }]);
    // health's failures counts what may still be stale; the classified one is apart.
    expect(await health('poison')).toMatchObject({ shortfall: 1, failures: 0 });

    const json = await runCli(cli, ['repair', '--json', '--schema', 'poison'], { DATABASE_URL: db.url });
    expect(JSON.parse(json.stdout)).toMatchObject({ repaired: 0, replayed: 0, classified: 0, shortfall: 1, status: 'shortfall',
      stays: { held: 0, stale_failures: 0, key_too_long: 1, value_not_storable: 0, missing_key_too_long: 1, missing_reused_tool_call_id: 0 } });
  });
});

describe('a document larger than capture_max_bytes', async () => {
  await db.createHost('large');
  await db.up('large');
  const t = await createTurn(db.pool, 'large', 'large');
  // 5 MB of description: over the 4 MB default.
  const frame = (status: string, tokens: number) => subagentMetadata({ tool_call_id: 'toolu_large', status,
    subagent: { status: 'running', total_tokens: tokens, description: 'd'.repeat(5 * 1024 * 1024) } });

  it('is not parsed inside kandev\'s write: recorded as deferred, stored by repair; a larger limit captures it live', async () => {
    await insertMessage(db.pool, 'large', { id: 'l', session: t.session, task: t.task, turn: t.turn, created_at: '2099-01-01 00:00:01',
      metadata: frame('in_progress', 10) });
    expect(await q(`SELECT count(*)::int AS n FROM large.task_session_subagents`)).toEqual([{ n: 0 }]);
    const [f] = await q(`SELECT message_id, sqlstate, message FROM large.subagent_context_failures`);
    expect(f).toMatchObject({ message_id: 'l', sqlstate: '54000' });
    expect(f.message).toMatch(/^capture deferred: a document of 52\d{5} bytes is larger than subagent_context.capture_max_bytes \(4194304\)/);
    expect(await health('large')).toMatchObject({ failures: 1 });

    const r = await runCli(cli, ['repair', '--json', '--schema', 'large'], { DATABASE_URL: db.url });
    expect(JSON.parse(r.stdout)).toMatchObject({ replayed: 1, shortfall: 0, status: 'healthy' });
    const after = await storedAndDerived(db, 'large', 'toolu_large');
    expect(after.stored).toEqual(after.derived);
    expect(after.stored).toMatchObject([{ total_tokens: 10n }]);
    // Health does not parse that document, and does not call its row an excess either.
    expect((await q(`SELECT shortfall::int, excess::int, failures::int, status FROM large.subagent_context_health()`))[0])
      .toEqual({ shortfall: 0, excess: 0, failures: 0, status: 'healthy' });

    // An operator who raises the limit (here for one session) has such frames captured inside the write.
    const writer = await db.connect();
    await writer.query(`SET subagent_context.capture_max_bytes = '8388608'`);
    await updateMessage(writer, 'large', 'l', frame('in_progress', 20), '2099-01-01 00:00:02');
    await writer.end();
    expect(await q(`SELECT count(*)::int AS n FROM large.subagent_context_failures WHERE replayed_at IS NULL`)).toEqual([{ n: 0 }]);
    expect((await storedAndDerived(db, 'large', 'toolu_large')).stored).toMatchObject([{ total_tokens: 20n }]);
  }, 300_000);

  it('a bad value of the limit means the default: kandev\'s write never fails on it', async () => {
    const writer = await db.connect();
    await writer.query(`SET subagent_context.capture_max_bytes = 'lots'`);
    await updateMessage(writer, 'large', 'l', frame('in_progress', 30), '2099-01-01 00:00:03');
    await writer.end();
    expect(await q(`SELECT message FROM large.subagent_context_failures WHERE replayed_at IS NULL`))
      .toEqual([{ message: expect.stringContaining('(4194304)') }]);
  }, 300_000);
});

