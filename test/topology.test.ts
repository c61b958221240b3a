// The topology parts that every server can check (the Citus cluster itself: test/citus/):
// - subagent_context_topology() names the layout the report and the Citus code layer go by;
// - sql/citus.sql's list of table-reading SQL functions is complete, and the PL/pgSQL versions it makes
//   answer exactly as the SQL ones (applied here, on a plain server, by forcing its conversion).
// splitStatements, which the migrations rely on for Citus, is tested alone: test/unit/statements.test.ts.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshDatabase } from './helpers/database.js';
import { createTurn, insertMessage, subagentMetadata } from '../kandev/host.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const db = await freshDatabase('topology');
const citusSql = readFileSync(join(PACKAGE_ROOT, 'sql', 'citus.sql'), 'utf8');
const TABLES = /task_session_messages|task_session_subagents|subagent_context_failures|subagent_context_reconciliation|kandev_meta/;

describe('subagent_context_topology()', () => {
  it("is 'plain' on a plain table and 'partitioned' on a partitioned one", async () => {
    await db.createHost('flat');
    await db.up('flat');
    await db.createHost('parts', { partitioned: true });
    await db.up('parts');
    const t = async (s: string) => (await db.query(`SELECT "${s}".subagent_context_topology() AS t`)).rows[0].t;
    expect(await t('flat')).toBe('plain');
    expect(await t('parts')).toBe('partitioned');
  });
});

describe("sql/citus.sql: SQL functions that read tables become PL/pgSQL on Citus", () => {
  it('its list holds every LANGUAGE sql function of an installation that names a table', async () => {
    await db.createHost('listed');
    await db.up('listed');
    const { rows } = await db.query(
      `SELECT p.proname, p.prosrc FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
        WHERE p.pronamespace = 'listed'::regnamespace AND l.lanname = 'sql' ORDER BY 1`);
    const reading = rows.filter((r) => TABLES.test(r.prosrc)).map((r) => r.proname);
    const listed = /p\.proname IN \(([^)]*)\)/.exec(citusSql)![1].match(/'([a-z_]+)'/g)!.map((x) => x.slice(1, -1));
    expect(reading.length).toBeGreaterThan(0);
    expect([...listed].sort()).toEqual([...reading].sort());
  });

  it('the converted functions give the same backfill, health and repair as the SQL ones', async () => {
    const seed = async (schema: string) => {
      await db.createHost(schema);
      const ids = await createTurn(db.pool, schema, schema);
      for (const i of [1, 2, 3]) {
        await insertMessage(db.pool, schema, { id: `h-${i}`, session: ids.session, task: ids.task, turn: ids.turn,
          metadata: subagentMetadata({ tool_call_id: `call-${i}`, status: i === 1 ? 'completed' : 'pending',
            subagent: { subagent_type: `t${i}`, total_tokens: i * 10 } }) });
      }
      return ids;
    };
    const outcome = async (schema: string, ids: { session: string; task: string; turn: string }, convert: boolean) => {
      await db.install(schema);
      if (convert) {
        // The conversion block alone, with its "only on Citus" guard lifted.
        const block = /DO \$citus\$[\s\S]*?\$citus\$;/.exec(citusSql)![0]
          .replace(/IF @extschema@\.subagent_context_topology\(\) <> 'citus' THEN\s*RETURN;\s*END IF;/, '')
          .replaceAll('@extschema@', `"${schema}"`);
        await db.query(block);
        const langs = (await db.query(
          `SELECT DISTINCT l.lanname FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
            WHERE p.pronamespace = $1::regnamespace AND p.proname IN ('subagent_store_history', 'subagent_message_keys')`, [schema])).rows;
        expect(langs).toEqual([{ lanname: 'plpgsql' }]);
      }
      const backfill = (await db.query(`SELECT status, inserted FROM "${schema}".subagent_context_backfill()`)).rows[0];
      await db.query(`UPDATE "${schema}".kandev_meta SET value = '2000-01-01T00:00:00.000000000Z' WHERE key = 'subagent_context_capture_since'`);
      const healthy = (await db.query(`SELECT shortfall, excess, status FROM "${schema}".subagent_context_health()`)).rows[0];
      await db.query(`DELETE FROM "${schema}".task_session_subagents WHERE tool_call_id = 'call-2'`);
      await insertMessage(db.pool, schema, { id: 'late', session: ids.session, task: ids.task, turn: ids.turn,
        metadata: subagentMetadata({ tool_call_id: 'call-4' }), created_at: '2026-08-13 00:00:00' });
      const missing = (await db.query(`SELECT shortfall, excess, status FROM "${schema}".subagent_context_health()`)).rows[0];
      const repaired = (await db.query(`SELECT repaired FROM "${schema}".subagent_context_repair()`)).rows[0];
      const stored = (await db.query(
        `SELECT tool_call_id, source, subagent_type, total_tokens, tool_status FROM "${schema}".task_session_subagents ORDER BY 1`)).rows;
      return { backfill, healthy, missing, repaired, stored };
    };
    const sql = await outcome('as_sql', await seed('as_sql'), false);
    const plpgsql = await outcome('as_plpgsql', await seed('as_plpgsql'), true);
    expect(sql.missing).toMatchObject({ shortfall: 1n, status: 'shortfall' });  // the comparison is not vacuous
    expect(sql.repaired.repaired).toBe(1n);
    expect(plpgsql).toEqual(sql);
  });
});
