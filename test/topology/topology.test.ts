// The topology parts that every server can check (the Citus cluster itself: test/citus/):
// - subagent_context_topology() names the layout the report goes by;
// - no SQL-language function of an installation reads a table that Citus distributes: Citus cannot plan
//   a query against a distributed table inside a parameterized SQL function (called directly it fails,
//   and inlined into a caller it makes the caller fail), so every function that reads one is PL/pgSQL,
//   the same on every topology.
// splitStatements, which the migrations rely on for Citus, is tested alone: test/unit/statements.test.ts.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';

const db = await freshDatabase('topology');
// kandev's tables (distributed or reference tables on Citus) and the two capture writes (distributed).
const DISTRIBUTED = /\b(task_session_messages|task_session_subagents|subagent_context_failures|kandev_meta|task_sessions|tasks)\b/;

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

describe('one code layer for every topology', () => {
  it('no LANGUAGE sql function of an installation names a table that Citus distributes', async () => {
    await db.createHost('listed');
    await db.up('listed');
    const { rows } = await db.query(
      `SELECT p.proname, l.lanname, p.prosrc FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
        WHERE p.pronamespace = 'listed'::regnamespace ORDER BY 1`);
    // The pure helpers mention a column or a JSON key of the same name at most: strip those spellings.
    const reads = (src: string) => DISTRIBUTED.test(src.replace(/'[^']*'/g, "''").replace(/\b[a-z_]+\.(task_id|task_session_id)\b/g, ''));
    expect(rows.filter((r) => r.lanname === 'sql' && reads(r.prosrc)).map((r) => r.proname)).toEqual([]);
    // … while the PL/pgSQL functions do read them (the check is not vacuous).
    expect(rows.filter((r) => r.lanname === 'plpgsql' && reads(r.prosrc)).length).toBeGreaterThan(5);
  });
});
