// Health (docs/health.md, README.md#commands): shortfall is the only alarm and goes non-zero on the first missed subagent,
// whatever excess exists; the CLI's exit status is 0 healthy/idle, 1 shortfall, 2 not activated or
// trigger off; repair brings the shortfall back to 0 without touching existing rows.
import { describe, expect, it } from 'vitest';
import { freshDatabase, writeUncaptured } from '../helpers/database.js';
import { builtCli, runCli, type CliResult } from '../helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata, type Queryable } from '../../kandev/host.js';
import { PACKAGE_VERSION } from '#sql';

const db = await freshDatabase('health');
const cli = builtCli();

const SINCE = '2030-01-01T00:00:00.000000000Z';

/** Installs and activates `schema`, then pins capture_since to a known instant. */
async function activated(schema: string, since = SINCE) {
  await db.createHost(schema);
  const result = await db.up(schema);
  expect(result.backfill.status).toBe('activated');
  await db.query(`UPDATE "${schema}".kandev_meta SET value = $1 WHERE key = 'subagent_context_capture_since'`, [since]);
  return createTurn(db.pool, schema, schema);
}

async function health(schema: string, client: Queryable = db.pool) {
  const { rows } = await client.query(`SELECT * FROM "${schema}".subagent_context_health()`);
  return rows[0];
}

const health_ = (schema: string, args: string[] = []): Promise<CliResult> =>
  runCli(cli, ['health', '--database-url', db.url, '--schema', schema, ...args]);

async function healthJson(schema: string) {
  const r = await health_(schema, ['--json']);
  return { code: r.code, body: JSON.parse(r.stdout), stderr: r.stderr };
}

/** A message written by a writer whose session does not fire ordinary triggers: capture misses it. */
const frame = (tool_call_id: string) => subagentMetadata({ tool_call_id, status: 'pending', subagent: { status: 'async_launched' } });

describe('after live writes only', async () => {
  const t = await activated('live');
  const at = (id: string, created_at: string) =>
    insertMessage(db.pool, 'live', { id, session: t.session, task: t.task, turn: t.turn, created_at, metadata: frame(`toolu_${id}`) });
  await at('before', '2029-12-31 23:59:59');
  await at('a', '2030-01-01 00:00:01');
  await at('b', '2030-01-01 00:00:02.5');

  it('reports 0 shortfall, 0 excess and the newest observed_at since activation', async () => {
    expect(await health('live')).toEqual({
      activated: true, capture_since: SINCE, backfill_through: '', shortfall: 0n, excess: 0n,
      last_observed_at: '2030-01-01 00:00:02.5', trigger_enabled: true, failures: 0n, collisions: 0n,
      status: 'healthy', installed_version: PACKAGE_VERSION, reconciled_at: null, uncompared: 0n,
    });
  });

  it('health --json prints one object with every README.md#commands field, status healthy, exit 0', async () => {
    const r = await health_('live', ['--json']);
    expect(r.code).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body).toEqual({
      status: 'healthy', activated: true, capture_since: SINCE, backfill_through: '', shortfall: 0, excess: 0,
      last_observed_at: '2030-01-01T00:00:02.500000Z', trigger_enabled: true, failures: 0, collisions: 0,
      stats: { attempted: 3, skipped_no_identity: 0, persisted: 3, failed: 0, anomalous_value: 0, unknown_execution: 3 },
      installed_version: PACKAGE_VERSION, upgrade_available: false, reconciled_at: null, uncompared: 0,
    });
    expect(r.stderr).toBe('');
  });

  it('prints the status, each number and the trigger state for a human', async () => {
    const r = await health_('live');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe('subagent-context health (schema live): healthy');
    expect(lines[1]).toBe('  every subagent message written since activation has its row.');
    expect(lines).toContain('  shortfall         0');
    expect(lines).toContain('  excess            0');
    expect(lines).toContain('  last observed     2030-01-01T00:00:02.500000Z');
    expect(lines).toContain(`  capture_since     ${SINCE}`);
    expect(lines).toContain("  backfill_through  '' (no history to backfill)");
    expect(lines).toContain('  trigger           installed, enabled');
    expect(lines).toContain('  failures          0');
  });

  it('counts failures recorded since activation only', async () => {
    await db.query(`INSERT INTO live.subagent_context_failures (occurred_at, task_session_id, tool_call_id, sqlstate, message)
                    VALUES ('2029-12-31 23:59:59.999999', 's', 'x', '40P01', 'before'),
                           ('2030-01-01 00:00:00', 's', 'y', '40P01', 'at capture_since')`);
    expect((await health('live')).failures).toBe(1n);
  });
});

describe('idle: activated, nothing written since', async () => {
  await activated('idle');

  it('is status idle with exit 0 and last_observed_at NULL', async () => {
    expect(await health('idle')).toMatchObject({ activated: true, shortfall: 0n, excess: 0n, last_observed_at: null });
    const { code, body } = await healthJson('idle');
    expect(code).toBe(0);
    expect(body.status).toBe('idle');
    expect((await health_('idle')).stdout).toContain('  last observed     none since activation\n');
  });
});

describe('a missed subagent beside a standing excess', async () => {
  const t = await activated('miss');
  const c = db.pool;
  await insertMessage(c, 'miss', { id: 'kept', session: t.session, task: t.task, turn: t.turn,
    created_at: '2030-01-01 00:00:01', metadata: frame('toolu_kept') });
  await insertMessage(c, 'miss', { id: 'gone', session: t.session, task: t.task, turn: t.turn,
    created_at: '2030-01-01 00:00:02', metadata: frame('toolu_gone') });
  // Excess: a row whose message was deleted, and a row written directly by the owner.
  await db.query(`DELETE FROM miss.task_session_messages WHERE id = 'gone'`);
  await db.query(`INSERT INTO miss.task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id, observed_at, updated_at)
                  VALUES ('direct', $1, $2, 'toolu_direct', 'unknown', '2030-01-01 00:00:03', '2030-01-01 00:00:03')`, [t.session, t.task]);

  it('reports excess alone as healthy: exit 0', async () => {
    expect(await health('miss')).toMatchObject({ shortfall: 0n, excess: 2n });
    const { code, body } = await healthJson('miss');
    expect(code).toBe(0);
    expect(body).toMatchObject({ status: 'healthy', shortfall: 0, excess: 2 });
  });

  it('goes to shortfall 1 on the first subagent written with capture disabled: exit 1', async () => {
    await writeUncaptured(db, 'miss', { id: 'missed', session: t.session, task: t.task, turn: t.turn,
      created_at: '2030-01-01 00:00:04', updated_at: '2030-01-01 00:00:05',
      metadata: subagentMetadata({ tool_call_id: 'toolu_missed', status: 'completed',
        subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 7, tool_use_count: 0 } }) });
    expect(await health('miss')).toMatchObject({ shortfall: 1n, excess: 2n });
    const { code, body } = await healthJson('miss');
    expect(code).toBe(1);
    expect(body).toMatchObject({ status: 'shortfall', shortfall: 1, excess: 2 });
    const human = await health_('miss');
    expect(human.code).toBe(1);
    expect(human.stdout.split('\n')[0]).toBe('subagent-context health (schema miss): shortfall');
    expect(human.stdout).toContain('1 subagent written since activation has no row.');
  });

  it('repair stores the missing row from history, reports 1, touches no existing row; shortfall back to 0', async () => {
    const before = (await db.query(`SELECT * FROM miss.task_session_subagents ORDER BY id`)).rows;
    const r = await runCli(cli, ['repair', '--database-url', db.url, '--schema', 'miss', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ repaired: 1, replayed: 0, classified: 0, held: 0, unreplayed: 0, shortfall: 0, uncompared: 0, status: 'healthy', stays: { held: 0, stale_failures: 0, key_too_long: 0, value_not_storable: 0, missing_key_too_long: 0, missing_reused_tool_call_id: 0 } });
    const after = (await db.query(`SELECT * FROM miss.task_session_subagents ORDER BY id`)).rows;
    expect(after.filter((row) => row.tool_call_id !== 'toolu_missed')).toEqual(before);
    const [{ id, ...repaired }] = after.filter((row) => row.tool_call_id === 'toolu_missed');
    expect(repaired).toEqual({
      task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: 'toolu_missed',
      agent_execution_id: 'unknown', parent_tool_call_id: null, subagent_type: 'explorer', description: null,
      agent_id: null, child_session_id: null, model: null, agent_status: 'completed', tool_status: 'completed',
      is_async: 0, total_tokens: 7n, tool_use_count: 0n, duration_ms: null, source: 'backfill',
      observed_at: '2030-01-01 00:00:04', settled_at: '2030-01-01 00:00:05', updated_at: '2030-01-01 00:00:05',
    });
    expect(await health('miss')).toMatchObject({ shortfall: 0n, excess: 2n });
    const again = await runCli(cli, ['repair', '--database-url', db.url, '--schema', 'miss']);
    expect(again).toMatchObject({ code: 0, stderr: '' });
    expect(again.stdout).toMatch(/^compared \d+ subagent messages?, stored 0 missing rows; shortfall now 0, nothing left to compare\n$/);
  });
});

describe('repair with the capture trigger still disabled', async () => {
  const t = await activated('stilloff');
  await db.query(`ALTER TABLE stilloff.task_session_messages DISABLE TRIGGER subagent_context_capture`);
  await insertMessage(db.pool, 'stilloff', { id: 'unseen', session: t.session, task: t.task, turn: t.turn,
    created_at: '2030-01-01 00:00:01', metadata: frame('toolu_unseen') });

  it('stores the row, then says health is still trigger_disabled and what turns capture back on', async () => {
    expect((await healthJson('stilloff')).body).toMatchObject({ status: 'trigger_disabled', shortfall: 1 });
    const r = await runCli(cli, ['repair', '--database-url', db.url, '--schema', 'stilloff']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.replace(/^compared \d+ subagent messages?, /, '')).toBe('stored 1 missing row; shortfall now 0, nothing left to compare\n' +
      'health is still trigger_disabled (exit 2): the capture trigger exists but does not fire: new subagents are not recorded. ' +
      'Run `ALTER TABLE "stilloff".task_session_messages ENABLE TRIGGER subagent_context_capture;`, then `subagent-context repair`.\n');
    const json = await runCli(cli, ['repair', '--database-url', db.url, '--schema', 'stilloff', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ repaired: 0, replayed: 0, classified: 0, shortfall: 0, uncompared: 0, status: 'trigger_disabled', stays: { held: 0, stale_failures: 0, key_too_long: 0, value_not_storable: 0, missing_key_too_long: 0, missing_reused_tool_call_id: 0 } });
    expect((await healthJson('stilloff')).code).toBe(2);
  });
});

describe('the 1-microsecond boundary of capture_since', async () => {
  const t = await activated('edge', '2030-01-01T00:00:00.000001000Z');
  const m = (id: string, created_at: string) => ({ id, session: t.session, task: t.task, turn: t.turn, created_at, metadata: frame(`toolu_${id}`) });

  it('counts a message created exactly at capture_since as after it, one microsecond earlier as before', async () => {
    await writeUncaptured(db, 'edge', m('at', '2030-01-01 00:00:00.000001'));
    await writeUncaptured(db, 'edge', m('earlier', '2030-01-01 00:00:00'));
    expect(await health('edge')).toMatchObject({ shortfall: 1n, excess: 0n, last_observed_at: null });
  });

  it('counts a row observed exactly at capture_since, not one observed a microsecond earlier', async () => {
    await db.query(`INSERT INTO edge.task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id, observed_at, updated_at)
                    VALUES ('r-at', $1, $2, 'toolu_row_at', 'unknown', '2030-01-01 00:00:00.000001', '2030-01-01 00:00:00.000001'),
                           ('r-earlier', $1, $2, 'toolu_row_earlier', 'unknown', '2030-01-01 00:00:00', '2030-01-01 00:00:00')`,
    [t.session, t.task]);
    expect(await health('edge')).toMatchObject({ shortfall: 1n, excess: 1n, last_observed_at: '2030-01-01 00:00:00.000001' });
  });
});

describe('under another session TimeZone', async () => {
  const t = await activated('zone');
  const m = (id: string, created_at: string) => ({ id, session: t.session, task: t.task, turn: t.turn, created_at, metadata: frame(`toolu_${id}`) });
  // Within 14 hours either side of capture_since: any time-zone shift would move them across it.
  await writeUncaptured(db, 'zone', m('after', '2030-01-01 00:00:01'));
  await writeUncaptured(db, 'zone', m('before', '2029-12-31 13:00:00'));
  await insertMessage(db.pool, 'zone', m('live', '2030-01-01 10:00:00'));
  await insertMessage(db.pool, 'zone', m('live-before', '2029-12-31 23:00:00'));

  it("gives identical numbers under UTC and Pacific/Kiritimati (UTC+14), and for a key without a zone", async () => {
    const utc = await db.connect();
    await utc.query(`SET TIME ZONE 'UTC'`);
    const kiritimati = await db.connect();
    await kiritimati.query(`SET TIME ZONE 'Pacific/Kiritimati'`);
    const expected = { activated: true, capture_since: SINCE, backfill_through: '', shortfall: 1n, excess: 0n,
      last_observed_at: '2030-01-01 10:00:00', trigger_enabled: true, failures: 0n, collisions: 0n,
      status: 'shortfall', installed_version: PACKAGE_VERSION, reconciled_at: null, uncompared: 0n };
    expect(await health('zone', utc)).toEqual(expected);
    expect(await health('zone', kiritimati)).toEqual(expected);
    // A hand-written key without a zone is read as UTC, whatever the session says.
    await db.query(`UPDATE zone.kandev_meta SET value = '2030-01-01 00:00:00' WHERE key = 'subagent_context_capture_since'`);
    const noZone = { ...expected, capture_since: '2030-01-01 00:00:00' };
    expect(await health('zone', kiritimati)).toEqual(noZone);
    expect(await health('zone', utc)).toEqual(noZone);
  });
});

describe('metadata that is not a subagent document', async () => {
  const t = await activated('junk');
  const m = (id: string, metadata: string | null) => ({ id, session: t.session, task: t.task, turn: t.turn,
    created_at: '2030-01-01 00:00:01', metadata });
  for (const [id, metadata] of [['null', null], ['empty', ''], ['null-text', 'null'], ['array', '[]'],
    ['truncated', '{"tool_call_id":"toolu_t","normalized":{"kind":"subagent_task"'], ['kind-string', '{"normalized":"subagent_task"}'],
    ['nul', '{"tool_call_id":"toolu_nul\\u0000","normalized":{"kind":"subagent_task"}}'],
    ['numeric-call', '{"tool_call_id":5,"normalized":{"kind":"subagent_task"}}']] as const) {
    if (await db.hostRefuses(metadata)) continue; // kandev's own index refuses it: no such message there
    await writeUncaptured(db, 'junk', m(id, metadata));
  }

  it('neither breaks health nor counts as missing', async () => {
    expect(await health('junk')).toMatchObject({ activated: true, shortfall: 0n, excess: 0n, failures: 0n });
    expect((await healthJson('junk')).code).toBe(0);
  });
});

describe('not activated, trigger off, not installed: exit 2', async () => {
  const t = await activated('off');
  await insertMessage(db.pool, 'off', { id: 'x', session: t.session, task: t.task, turn: t.turn,
    created_at: '2030-01-01 00:00:01', metadata: frame('toolu_x') });

  it('reports a disabled trigger', async () => {
    await db.query(`ALTER TABLE off.task_session_messages DISABLE TRIGGER subagent_context_capture`);
    expect((await health('off')).trigger_enabled).toBe(false);
    const { code, body } = await healthJson('off');
    expect(code).toBe(2);
    expect(body).toMatchObject({ status: 'trigger_disabled', trigger_enabled: false, shortfall: 0 });
    expect((await health_('off')).stdout).toContain('  trigger           installed, DISABLED\n');
  });

  it('reports a trigger that fires only on replicas as disabled', async () => {
    await db.query(`ALTER TABLE off.task_session_messages ENABLE REPLICA TRIGGER subagent_context_capture`);
    expect((await health('off')).trigger_enabled).toBe(false);
    expect((await healthJson('off')).code).toBe(2);
    await db.query(`ALTER TABLE off.task_session_messages ENABLE TRIGGER subagent_context_capture`);
    expect((await healthJson('off')).code).toBe(0);
  });

  it('reports missing keys as not activated: no comparison runs', async () => {
    const keys = (await db.query(`SELECT key, value FROM off.kandev_meta`)).rows;
    await db.query(`DELETE FROM off.kandev_meta`);
    expect(await health('off')).toEqual({ activated: false, capture_since: null, backfill_through: null,
      shortfall: null, excess: null, last_observed_at: null, trigger_enabled: true, failures: null, collisions: 0n,
      status: 'not_activated', installed_version: PACKAGE_VERSION, reconciled_at: null, uncompared: null });
    const { code, body } = await healthJson('off');
    expect(code).toBe(2);
    expect(body).toMatchObject({ status: 'not_activated', activated: false, shortfall: null });
    const human = await health_('off');
    expect(human.stdout).toContain('  shortfall         not measured (not activated)\n');
    for (const k of keys) await db.query(`INSERT INTO off.kandev_meta (key, value) VALUES ($1, $2)`, [k.key, k.value]);
  });

  it('reports a dropped trigger as missing', async () => {
    await db.query(`DROP TRIGGER subagent_context_capture ON off.task_session_messages`);
    const { code, body } = await healthJson('off');
    expect(code).toBe(2);
    expect(body).toMatchObject({ status: 'trigger_missing', trigger_enabled: false, activated: true });
  });

  it('names a trigger left behind without the rest (a partial removal): trigger_orphaned, exit 2', async () => {
    await db.createHost('orphan');
    await db.up('orphan');
    // What a half-run removal leaves: the tables dropped, the trigger and functions still there.
    await db.query(`DROP TABLE orphan.task_session_subagents, orphan.subagent_context_failures`);
    expect((await healthJson('orphan'))).toMatchObject({ code: 2, body: { status: 'trigger_orphaned', trigger_enabled: true } });
    // And with health's own function gone too, the CLI still names it from the catalog.
    await db.query(`DROP FUNCTION orphan.subagent_context_health()`);
    const human = await health_('orphan');
    expect(human.code).toBe(2);
    expect(human.stdout).toContain('trigger_orphaned');
    expect(human.stdout).toContain('subagent-context uninstall');
  });

  it('reports a schema without subagent-context as not installed, still one JSON object', async () => {
    await db.createHost('bare');
    const { code, body } = await healthJson('bare');
    expect(code).toBe(2);
    expect(body).toEqual({ status: 'not_installed', activated: false, capture_since: null, backfill_through: null,
      shortfall: null, excess: null, last_observed_at: null, trigger_enabled: false, failures: null,
      collisions: null, stats: null, installed_version: null, upgrade_available: false, reconciled_at: null, uncompared: null });
  });
});

describe('a tool_call_id reused after activation in the same session (README.md#limits limit)', async () => {
  await db.createHost('reuse');
  const t = await createTurn(db.pool, 'reuse', 'reuse');
  await insertMessage(db.pool, 'reuse', { id: 'first', session: t.session, task: t.task, turn: t.turn,
    created_at: '2026-01-01 00:00:00', metadata: frame('toolu_again') });
  await db.up('reuse');
  await db.query(`UPDATE reuse.kandev_meta SET value = $1 WHERE key = 'subagent_context_capture_since'`, [SINCE]);
  // The later message merges into the backfilled row, whose observed_at (write-once) predates activation.
  await insertMessage(db.pool, 'reuse', { id: 'second', session: t.session, task: t.task, turn: t.turn,
    created_at: '2030-01-01 00:00:01', metadata: frame('toolu_again') });

  it('stays a shortfall that repair cannot clear, and repair says so', async () => {
    expect(await health('reuse')).toMatchObject({ shortfall: 1n, excess: 0n, last_observed_at: null });
    const r = await runCli(cli, ['repair', '--database-url', db.url, '--schema', 'reuse']);
    expect(r.code).toBe(0);
    expect(r.stdout.replace(/^compared \d+ subagent messages?, /, '')).toBe('stored 0 missing rows; still missing 1\n' +
      '1 still missing because a row for the same session and tool call exists, observed before capture_since ' +
      '(a reused tool_call_id): repair never touches an existing row. See docs/health.md.\n');
    const { rows } = await db.query(`SELECT tool_call_id, source, observed_at FROM reuse.task_session_subagents`);
    expect(rows).toEqual([{ tool_call_id: 'toolu_again', source: 'backfill', observed_at: '2026-01-01 00:00:00' }]);
  });
});
