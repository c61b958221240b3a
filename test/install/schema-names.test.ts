// Installation works in any schema (docs/install.md): a schema name is an identifier, never part
// of a format string, so `%` in it neither breaks the install (format()'s "too few arguments") nor, as
// `%%`, addresses another schema. A first install that fails leaves the schema as it was: no
// bookkeeping table of node-pg-migrate behind.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createKandevSubagentTable, createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { COUNTERS } from '#sql';

const db = await freshDatabase('schema_names', { from: 'host' });
const cli = builtCli();
const SCHEMAS = ['a%b', 'a%%b', 'a%s', 'public'];
const q = (schema: string) => `"${schema}"`;
const COUNTER_SEQUENCES = COUNTERS.map((c) => `subagent_context_${c}_seq`);

describe('schemas whose names hold %', () => {
  it('install side by side with public, each capturing into its own table', async () => {
    for (const schema of SCHEMAS.filter((s) => s !== 'public')) await db.createHost(schema);
    for (const schema of SCHEMAS) {
      const r = await runCli(cli, ['up', '--database-url', db.url, '--schema', schema]);
      expect(r.stderr, schema).toBe('');
      expect(r.code, schema).toBe(0);
    }
    for (const [i, schema] of SCHEMAS.entries()) {
      const t = await createTurn(db.pool, schema, `s${i}`);
      await insertMessage(db.pool, schema, { id: `m${i}`, session: t.session, task: t.task, turn: t.turn,
        metadata: subagentMetadata({ tool_call_id: `toolu_${i}`, status: 'pending', subagent: {} }) });
    }
    for (const [i, schema] of SCHEMAS.entries()) {
      const { rows } = await db.query(`SELECT tool_call_id FROM ${q(schema)}.task_session_subagents`);
      expect(rows, schema).toEqual([{ tool_call_id: `toolu_${i}` }]);
      const { rows: [seqs] } = await db.query(
        `SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'S' AND relname = ANY($2)`,
        [q(schema), COUNTER_SEQUENCES]);
      expect(seqs.n, schema).toBe(6);
      const health = await runCli(cli, ['health', '--database-url', db.url, '--schema', schema, '--json']);
      // Idle: the message above is dated before activation (insertMessage's default time).
      expect(JSON.parse(health.stdout).status, schema).toBe('idle');
    }
    // Nothing of one landed in another: `a%%b` is not `a%b`.
    expect((await db.query(`SELECT count(*)::int AS n FROM "a%b".task_session_subagents`)).rows[0].n).toBe(1);
  }, 180_000);

  it('uninstall each, leaving the others installed', async () => {
    const r = await runCli(cli, ['uninstall', '--database-url', db.url, '--schema', 'a%%b', '--drop-data']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const { rows } = await db.query(
      `SELECT n.nspname, count(*)::int AS n FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE c.relkind = 'S' AND c.relname = ANY($2) AND n.nspname = ANY($1) GROUP BY 1 ORDER BY 1`, [SCHEMAS, COUNTER_SEQUENCES]);
    expect(rows).toEqual([{ nspname: 'a%b', n: 6 }, { nspname: 'a%s', n: 6 }, { nspname: 'public', n: 6 }]);
  }, 120_000);
});

describe('a first install that fails', () => {
  it('leaves no bookkeeping table behind, and a fixed schema then installs', async () => {
    await db.createHost('a%broken');
    // kandev's own subagent table, with a column of another type: the install refuses it.
    await createKandevSubagentTable(db.pool, 'a%broken');
    await db.query(`ALTER TABLE "a%broken".task_session_subagents ALTER COLUMN tool_status TYPE integer USING NULL`);
    const r = await runCli(cli, ['up', '--database-url', db.url, '--schema', 'a%broken']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/different shape: column tool_status is integer, expected text/);
    expect((await db.query(`SELECT to_regclass('"a%broken".subagent_context_migrations') AS t`)).rows[0].t).toBeNull();

    await db.query(`ALTER TABLE "a%broken".task_session_subagents ALTER COLUMN tool_status TYPE text`);
    const again = await runCli(cli, ['up', '--database-url', db.url, '--schema', 'a%broken']);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
  }, 120_000);
});
