// docs/integration.md: installation creates task_session_subagents with the exact contract shape, adopts an existing
// table of that shape (and kandev >= 0.89's own, widening its integer metrics), and refuses any other
// shape with an error naming the difference, changing nothing. Each scenario has its own schema.
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { migrate } from '../../src/install.js';
import { KEY_COLUMNS as KEY, SUBAGENT_KEY, SUBAGENT_TABLE } from '../model/subagent-table.js';

const db = await freshDatabase('table_adoption');
const pool = db.pool;

/** The unique key's columns, as strings (for includes(name)). */
const KEY_COLUMNS: readonly string[] = KEY;

/** How a pre-existing table differs from the contract's: columns left out, redeclared, another key. */
interface TableChange { omit?: string[]; declare?: Record<string, string>; key?: string }

/** DDL for a pre-existing table: the contract's, changed as asked. */
function tableDdl(schema: string, change: TableChange = {}) {
  const cols = SUBAGENT_TABLE
    .filter(([name]) => !(change.omit ?? []).includes(name))
    .map(([name, decl]) => `${name} ${(change.declare ?? {})[name] ?? decl}`);
  const key = change.key ?? SUBAGENT_KEY;
  return `CREATE TABLE ${schema}.task_session_subagents (${[...cols, ...(key ? [key] : [])].join(', ')})`
    .replaceAll('@s', schema);
}

/** One connection for one scenario, closed when it is done: ~60 scenarios must not hold ~60 connections. */
async function withClient<T>(fn: (c: pg.Client, notices: string[]) => Promise<T>): Promise<T> {
  const c = await db.connect();
  const notices: string[] = [];
  c.on('notice', (n) => notices.push(n.message ?? ''));
  try { return await fn(c, notices); } finally { await c.end(); }
}

interface Column { name: string; type: string; notnull: boolean; default: string | null }
/** Everything an installation could change in a schema, as one comparable value. */
interface SchemaState {
  columns: Column[]; constraints: string[]; indexes: string[]; relations: string[]; functions: string[];
  types: string[]; triggers: string[]; meta_keys: string[];
}

async function schemaState(schema: string) {
  const { rows: [s] } = await db.query<SchemaState>(`
    SELECT
      (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
                                         'notnull', a.attnotnull, 'default', pg_get_expr(d.adbin, d.adrelid))
                       ORDER BY a.attnum)
         FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attrelid = format('%I.task_session_subagents', $1::text)::regclass AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
      (SELECT json_agg(pg_get_constraintdef(c.oid) ORDER BY pg_get_constraintdef(c.oid))
         FROM pg_constraint c WHERE c.conrelid = format('%I.task_session_subagents', $1::text)::regclass) AS constraints,
      (SELECT json_agg(i.indexdef ORDER BY i.indexname) FROM pg_indexes i
        WHERE i.schemaname = $1 AND i.tablename <> 'subagent_context_migrations') AS indexes,
      (SELECT json_agg(c.relname || ':' || c.relkind::text || ':' || coalesce(c.relacl::text, '') ORDER BY c.relname)
         FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relname <> 'subagent_context_migrations'
          AND c.relname NOT LIKE 'subagent_context_migrations_%') AS relations,
      (SELECT coalesce(json_agg(p.proname ORDER BY p.proname), '[]') FROM pg_proc p WHERE p.pronamespace = $1::regnamespace) AS functions,
      (SELECT coalesce(json_agg(t.typname ORDER BY t.typname), '[]') FROM pg_type t
        WHERE t.typnamespace = $1::regnamespace AND t.typtype = 'c'
          AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')) AS types,
      (SELECT coalesce(json_agg(g.tgname ORDER BY g.tgname), '[]') FROM pg_trigger g
        WHERE g.tgrelid = format('%I.task_session_messages', $1::text)::regclass AND NOT g.tgisinternal) AS triggers,
      (SELECT coalesce(json_agg(m.key ORDER BY m.key), '[]') FROM "${schema}".kandev_meta m) AS meta_keys`,
  [schema]);
  return { ...s, rows: await storedRows(schema) };
}

async function storedRows(schema: string) {
  return (await db.query(`SELECT * FROM "${schema}".task_session_subagents ORDER BY id`)).rows;
}

async function migrationsRecorded(schema: string): Promise<string[]> {
  const { rows: [r] } = await db.query(`SELECT to_regclass(format('%I.subagent_context_migrations', $1::text)) AS t`, [schema]);
  if (!r.t) return [];
  const { rows } = await db.query(`SELECT name FROM "${schema}".subagent_context_migrations ORDER BY id`);
  return rows.map((x) => x.name);
}

/** One stored row, written straight into a pre-existing table (as kandev's own writer would). */
async function seedRow(schema: string, key: string, extra: Record<string, unknown> = {}) {
  const t = await createTurn(pool, schema, key);
  const row = {
    id: `pre-${key}`, task_session_id: t.session, task_id: t.task, turn_id: t.turn, tool_call_id: `toolu_${key}`,
    agent_execution_id: 'unknown', model: 'kept-model', tool_status: 'completed', is_async: 1,
    total_tokens: 275717, tool_use_count: 0, duration_ms: 91234, source: 'live',
    observed_at: '2026-08-01 10:00:00.123456', settled_at: '2026-08-01 10:00:05', updated_at: '2026-08-01 10:00:05',
    ...extra,
  };
  const names = Object.keys(row);
  await db.query(`INSERT INTO "${schema}".task_session_subagents (${names.join(', ')})
                  VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(row));
  return t;
}

describe('a fresh installation', () => {
  it('creates the table with exactly the docs/integration.md columns, types, nullability, defaults and keys', async () => {
    await db.createHost('fresh');
    await db.install('fresh');
    const { rows: columns } = await db.query(`
      SELECT column_name, data_type, is_nullable, column_default, datetime_precision
        FROM information_schema.columns
       WHERE table_schema = 'fresh' AND table_name = 'task_session_subagents' ORDER BY ordinal_position`);
    const nullable = new Set(['turn_id', 'parent_tool_call_id', 'subagent_type', 'description', 'agent_id',
      'child_session_id', 'model', 'agent_status', 'tool_status', 'total_tokens', 'tool_use_count', 'duration_ms', 'settled_at']);
    const types: Record<string, string> = {
      is_async: 'integer', total_tokens: 'bigint', tool_use_count: 'bigint', duration_ms: 'bigint',
      observed_at: 'timestamp without time zone', settled_at: 'timestamp without time zone', updated_at: 'timestamp without time zone',
    };
    const defaults: Record<string, string> = { is_async: '0', source: "'live'::text" };
    expect(columns).toEqual(SUBAGENT_TABLE.map(([name]) => ({
      column_name: name,
      data_type: types[name] ?? 'text',
      is_nullable: nullable.has(name) ? 'YES' : 'NO',
      // Only is_async and source have defaults; in particular the metrics have none (NULL = not reported).
      column_default: defaults[name] ?? null,
      datetime_precision: types[name]?.startsWith('timestamp') ? 6 : null,
    })));

    const { rows: constraints } = await db.query(`
      SELECT contype, pg_get_constraintdef(oid) AS def FROM pg_constraint
       WHERE conrelid = 'fresh.task_session_subagents'::regclass
         AND contype <> 'n'   -- PostgreSQL 18 also lists each NOT NULL here; nullability is pinned above
       ORDER BY contype, def`);
    expect(constraints).toEqual([
      { contype: 'f', def: 'FOREIGN KEY (task_session_id) REFERENCES fresh.task_sessions(id) ON DELETE CASCADE' },
      { contype: 'p', def: 'PRIMARY KEY (id)' },
      { contype: 'u', def: 'UNIQUE (task_session_id, agent_execution_id, tool_call_id)' },
    ]);
    // Indexes lead with the session (the unique key), task and turn: the lookups docs/integration.md names.
    const { rows: leading } = await db.query(`
      SELECT DISTINCT a.attname AS col FROM pg_index i
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
       WHERE i.indrelid = 'fresh.task_session_subagents'::regclass`);
    expect(leading.map((r) => r.col)).toEqual(expect.arrayContaining(['id', 'task_session_id', 'task_id', 'turn_id']));
  });
});

describe('adopting an existing table', () => {
  it('an identical table is adopted as it is, its rows intact, and capture merges into them', async () => {
    await db.createHost('identical');
    await db.query(tableDdl('identical'));
    const t = await seedRow('identical', 'same');
    const before = await schemaState('identical');
    await withClient(async (c, notices) => {
      await migrate(c, 'identical');
      expect(notices).toContain('subagent-context: adopted the existing task_session_subagents unchanged');
    });
    const after = await schemaState('identical');
    expect(after.columns).toEqual(before.columns);
    expect(after.constraints).toEqual(before.constraints);
    expect(after.rows).toEqual(before.rows);
    expect(after.triggers).toEqual(['subagent_context_capture']);

    // A live frame for the stored key merges into the adopted row (same id, source, observed_at).
    await insertMessage(pool, 'identical', {
      id: 'msg-same', session: t.session, task: t.task, turn: t.turn, created_at: '2026-08-12 09:00:00', updated_at: '2026-08-12 09:00:00',
      metadata: subagentMetadata({ tool_call_id: 'toolu_same', status: 'failed', subagent: { agent_id: 'late-agent' } }),
    });
    const { rows } = await db.query(`SELECT * FROM identical.task_session_subagents`);
    expect(rows).toEqual([{ ...before.rows[0], agent_id: 'late-agent', updated_at: '2026-08-12 09:00:00' }]);
    expect([rows[0].tool_status, rows[0].settled_at]).toEqual(['completed', '2026-08-01 10:00:05']);
  });

  it("kandev >= 0.89's table (integer metrics, agent_execution_id DEFAULT 'unknown') is adopted and its metrics widened to bigint", async () => {
    await db.createHost('kandev089');
    // kandev's own DDL: integer metrics, timestamps without a declared precision, an unnamed unique key.
    await db.query(tableDdl('kandev089', {
      declare: {
        agent_execution_id: "text NOT NULL DEFAULT 'unknown'",
        total_tokens: 'integer', tool_use_count: 'integer', duration_ms: 'integer',
        observed_at: 'timestamp NOT NULL', settled_at: 'timestamp', updated_at: 'timestamp NOT NULL',
      },
    }));
    const t = await seedRow('kandev089', 'k', { agent_execution_id: 'exec-from-kandev' });
    await db.query(`INSERT INTO kandev089.task_session_subagents (id, task_session_id, task_id, tool_call_id, observed_at, updated_at)
                    VALUES ('pre-default', $1, $2, 'toolu_default', '2026-08-01 11:00:00', '2026-08-01 11:00:00')`, [t.session, t.task]);
    const before = await schemaState('kandev089');
    await withClient(async (c, notices) => {
      await migrate(c, 'kandev089');
      expect(notices).toContain(
        'subagent-context: adopted the existing task_session_subagents; widened total_tokens, tool_use_count, duration_ms from integer to bigint');
    });
    const after = await schemaState('kandev089');
    const widened = new Set(['total_tokens', 'tool_use_count', 'duration_ms']);
    expect(after.columns).toEqual(before.columns.map((col) => widened.has(col.name) ? { ...col, type: 'bigint' } : col));
    // kandev's own default for the execution id stays: its writer may rely on it.
    expect(after.columns.find((col) => col.name === 'agent_execution_id')?.default).toBe("'unknown'::text");
    expect(after.constraints).toEqual(before.constraints);
    // Same rows, same values; only the metrics now come back as bigint.
    const big = (v: number | null) => (v === null ? null : BigInt(v));
    expect(after.rows).toEqual(before.rows.map((r) => ({
      ...r, total_tokens: big(r.total_tokens), tool_use_count: big(r.tool_use_count), duration_ms: big(r.duration_ms),
    })));
    expect(after.rows.map((r) => [r.id, r.agent_execution_id, r.total_tokens, r.tool_use_count])).toEqual([
      ['pre-default', 'unknown', null, null], ['pre-k', 'exec-from-kandev', 275717n, 0n]]);

    // A metric beyond integer now lands.
    await insertMessage(pool, 'kandev089', {
      id: 'msg-big', session: t.session, task: t.task, turn: t.turn,
      metadata: subagentMetadata({ tool_call_id: 'toolu_big', status: 'completed', subagent: { total_tokens: 3_000_000_000, duration_ms: 2_147_483_648 } }),
    });
    const { rows } = await db.query(`SELECT total_tokens, duration_ms FROM kandev089.task_session_subagents WHERE tool_call_id = 'toolu_big'`);
    expect(rows).toEqual([{ total_tokens: 3_000_000_000n, duration_ms: 2_147_483_648n }]);
  });

  it('a unique key with INCLUDE columns is the key (ON CONFLICT can use it)', async () => {
    await db.createHost('include');
    await db.query(tableDdl('include', { key: `${SUBAGENT_KEY.replace(')', ') INCLUDE (model)')}` }));
    await withClient(async (c, notices) => {
      await migrate(c, 'include');
      expect(notices).toContain('subagent-context: adopted the existing task_session_subagents unchanged');
    });
    const t = await createTurn(pool, 'include', 'inc');
    for (const model of ['m-1', 'm-2']) {
      await db.query(`INSERT INTO include.task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
        VALUES ('msg-inc', $1, $2, $3, '', 'tool_call', $4, '2026-08-12 09:00:00', '2026-08-12 09:00:00')
        ON CONFLICT (id) DO UPDATE SET metadata = EXCLUDED.metadata`,
        [t.session, t.task, t.turn, subagentMetadata({ tool_call_id: 'toolu_inc', status: 'pending', subagent: { model } })]);
    }
    const { rows } = await db.query(`SELECT model FROM include.task_session_subagents`);
    expect(rows).toEqual([{ model: 'm-2' }]);
    expect((await db.query(`SELECT count(*)::int AS n FROM include.subagent_context_failures`)).rows[0].n).toBe(0);
  });

  it('only the metrics that are integer are widened, and the notice says which', async () => {
    await db.createHost('partial');
    await db.query(tableDdl('partial', { declare: { tool_use_count: 'integer' } }));
    await withClient(async (c, notices) => {
      await migrate(c, 'partial');
      expect(notices).toContain('subagent-context: adopted the existing task_session_subagents; widened tool_use_count from integer to bigint');
    });
    const { rows } = await db.query(`SELECT column_name, data_type FROM information_schema.columns
      WHERE table_schema = 'partial' AND table_name = 'task_session_subagents' AND data_type IN ('integer', 'bigint') ORDER BY ordinal_position`);
    expect(rows).toEqual([
      { column_name: 'is_async', data_type: 'integer' },
      { column_name: 'total_tokens', data_type: 'bigint' },
      { column_name: 'tool_use_count', data_type: 'bigint' },
      { column_name: 'duration_ms', data_type: 'bigint' },
    ]);
  });
});

describe('a table of another shape stops installation and nothing changes', () => {
  const cases: Array<[string, Parameters<typeof tableDdl>[1], string]> = [
    ['a missing column', { omit: ['child_session_id'] }, 'column child_session_id is missing'],
    ['a text metric', { declare: { total_tokens: 'text' } }, 'column total_tokens is text, expected bigint'],
    ['a nullable task_id', { declare: { task_id: 'text' } }, 'column task_id is nullable, expected NOT NULL'],
    ['a NOT NULL turn_id', { declare: { turn_id: "text NOT NULL DEFAULT ''" } }, 'column turn_id is NOT NULL, expected nullable'],
    ['a timestamptz observed_at', { declare: { observed_at: 'timestamptz NOT NULL' } },
      'column observed_at is timestamp with time zone, expected timestamp without time zone'],
    ['an integer metric declared NOT NULL', { declare: { total_tokens: 'integer NOT NULL DEFAULT 0' } },
      'column total_tokens is NOT NULL, expected nullable'],
    ['a unique key in another order', { key: 'UNIQUE (task_session_id, tool_call_id, agent_execution_id)' },
      'unique key (task_session_id, agent_execution_id, tool_call_id) is missing'],
    ['the two-column key of an older kandev', { key: 'UNIQUE (task_session_id, tool_call_id)' },
      'unique key (task_session_id, agent_execution_id, tool_call_id) is missing'],
    ['no unique key at all', { key: '' }, 'unique key (task_session_id, agent_execution_id, tool_call_id) is missing'],
    ['a deferrable unique key (ON CONFLICT cannot use it)', { key: `${SUBAGENT_KEY} DEFERRABLE` },
      'unique key (task_session_id, agent_execution_id, tool_call_id) is DEFERRABLE, ON CONFLICT cannot use it'],
  ];

  it.each(cases.map((c, i) => [...c, `other${i}`] as const))('%s', async (label, change, difference, schema) => {
    await db.createHost(schema);
    await db.query(tableDdl(schema, change));
    if (!change?.omit) await seedRow(schema, 'x');  // rows must survive the refusal too
    const before = await schemaState(schema);
    expect(before.functions).toEqual([]);

    let error: Error | undefined;
    await withClient(async (c) => {
      await migrate(c, schema).catch((e) => { error = e; });
      // The failed install leaves the connection usable, out of any transaction, holding no migration lock.
      const { rows: [state] } = await c.query(`SELECT now() = statement_timestamp() AS outside_transaction,
          (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS advisory_locks,
          current_setting('search_path') AS search_path`);
      expect(state).toEqual({ outside_transaction: true, advisory_locks: 0, search_path: '"$user", public' });
    });
    expect(error).toBeDefined();
    // The message itself names the difference: the CLI and node-pg-migrate print the message.
    expect(error?.message).toContain(`existing table "${schema}".task_session_subagents has a different shape`);
    expect(error?.message).toContain(difference);
    expect(error?.message).toContain('nothing was changed');

    expect(await schemaState(schema)).toEqual(before);
    expect(await migrationsRecorded(schema)).toEqual([]);

    // And the CLI's `up` (migrations, then backfill) fails the same way, still changing nothing.
    const upError = await db.up(schema).then(() => null, (e) => e);
    expect(upError?.message).toContain(difference);
    expect(await schemaState(schema)).toEqual(before);
    expect(await migrationsRecorded(schema)).toEqual([]);
  });

  // Every column is checked: its absence, and its nullability flipped, each stop the installation.
  const flips = SUBAGENT_TABLE.map(([name, decl]) => {
    const notNull = /NOT NULL|PRIMARY KEY/.test(decl);
    const type = decl.split(' ')[0];
    return { name, flipped: notNull ? type : `${type} NOT NULL`, said: notNull ? 'nullable, expected NOT NULL' : 'NOT NULL, expected nullable' };
  }).filter(({ name }) => name !== 'id');  // a nullable primary key does not exist in PostgreSQL
  it.each([
    ...SUBAGENT_TABLE.map(([name]) => ({
      label: `without ${name}`, difference: `column ${name} is missing`,
      // Without one of its columns the unique key cannot be declared either.
      change: { omit: [name], ...(KEY_COLUMNS.includes(name) ? { key: '' } : {}) } as TableChange,
    })),
    ...flips.map(({ name, flipped, said }) => ({
      label: `${name} ${said.split(',')[0]}`, change: { declare: { [name]: flipped } } as TableChange, difference: `column ${name} is ${said}` })),
  ])('each column: $label', async ({ change, difference }) => {
    const schema = 'each_column';
    if (!(await db.query(`SELECT to_regnamespace('each_column') AS s`)).rows[0].s) await db.createHost(schema);
    await db.query(`DROP TABLE IF EXISTS each_column.task_session_subagents`);
    await db.query(tableDdl(schema, change));
    const error = await withClient((c) => migrate(c, schema).then(() => null, (e) => e));
    expect(error?.message).toBe(
      `subagent-context: existing table "each_column".task_session_subagents has a different shape: ${difference}` +
      `${change.omit?.some((c) => KEY_COLUMNS.includes(c))
        ? '; unique key (task_session_id, agent_execution_id, tool_call_id) is missing' : ''}; nothing was changed`);
    const { rows: [n] } = await db.query(`SELECT count(*)::int AS functions FROM pg_proc WHERE pronamespace = 'each_column'::regnamespace`);
    expect(n.functions).toBe(0);
  });

  it('lists every difference at once', async () => {
    await db.createHost('many');
    await db.query(tableDdl('many', { omit: ['model', 'settled_at'], declare: { duration_ms: 'numeric' } }));
    const error = await withClient((c) => migrate(c, 'many').then(() => null, (e) => e));
    expect(error.message).toBe('subagent-context: existing table "many".task_session_subagents has a different shape: ' +
      'column model is missing; column duration_ms is numeric, expected bigint; column settled_at is missing; nothing was changed');
  });
});
