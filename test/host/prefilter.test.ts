// The prefilter is defined once (MAY_QUALIFY in sql/loader.js) and spelled out where an expression must
// stand alone: the trigger's WHEN clause, health's partial index on task_session_messages and
// subagent_context_may_qualify(), which every other path calls. Pin every spelling in sql/ to the definition, the
// three together input by input, what the filter lets through (the literal subagent_task, one pass), and
// that an escaped spelling is no subagent write on any path.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HEALTH_INDEX, MAY_QUALIFY } from '#sql';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freshDatabase } from '../helpers/database.js';

const db = await freshDatabase('prefilter', { from: 'installed' });

// Texts on both sides of each part of the filter: the name, near misses of it (a regular expression
// would read `_` or `.` loosely if it were written wrongly), escapes and bare backslashes.
const CORPUS = [
  '{"normalized":{"kind":"subagent_task"}}', 'subagent_task', 'xsubagent_taskx', 'subagent_tas', 'ubagent_task',
  'SUBAGENT_TASK', 'subagentXtask', 'subagent.task', 'subagent-task', 'subagent task', 'subagent_Task',
  '{"k":"subagent\\u005ftask"}', '\\u', 'a\\ub', '\\U0041', '\\\\u', '\\', 'u', '\\n', '\\x',
  '{"normalized":{"kind":"tool_call"}}', 'streaming text', '', 'ü ∑ 😀', 'a'.repeat(100_000) + 'subagent_task',
  // Go's encoding/json escapes (docs/integration.md) are not letters of the kind: they stop here.
  '{"command":"cd x \\u0026\\u0026 go test"}', '\\u003cdiv\\u003e', 'a\\u2028b\\u2029', '\\u001b[31m',
  // Escapes of the kind's letters do not pass: the literal is part of what qualifies.
  '{"kind":"\\u0073ubagent_task"}', '{"kind":"subagent_tas\\u006B"}',
];

describe('the non-subagent fast path', () => {
  it('every SQL file spells the prefilter and health\'s index as sql/loader.js defines them', () => {
    const dir = join(PACKAGE_ROOT, 'sql');
    const spelled = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sql')).flatMap((f) => {
      const text = readFileSync(join(dir, f), 'utf8');
      return [
        ...[...text.matchAll(/strpos\(([^,()]+), '{1,2}subagent_task'{1,2}\) > 0/g)].map((m) => [f, m[0].replaceAll("''", "'"), MAY_QUALIFY(m[1]!)]),
        ...[...text.matchAll(/subagent-context: prefilter [0-9a-f]+/g)].map((m) => [f, m[0], HEALTH_INDEX.comment]),
        // (in a string literal, as indexes/message-index-partitioned.sql formats it, its quotes are doubled)
        ...[...text.matchAll(/\(created_at\) WHERE [^\n;]*?> 0/g)].map((m) => [f, m[0].replaceAll("''", "'"), HEALTH_INDEX.definition]),
      ];
    });
    expect(spelled.filter(([, found, defined]) => found !== defined)).toEqual([]);
    // Where each must be: the WHEN clause, the function, both index files (definition and comment).
    const files = (want: string) => [...new Set(spelled.filter(([, found]) => found === want).map(([f]) => f))].sort();
    expect(files(MAY_QUALIFY('NEW.metadata'))).toEqual(['code/trigger.sql']);
    expect(files(MAY_QUALIFY('metadata'))).toEqual(['code/derive.sql', 'indexes/message-index-partitioned.sql', 'indexes/message-index.sql']);
    expect(files(HEALTH_INDEX.comment)).toEqual(['indexes/message-index-partitioned.sql', 'indexes/message-index.sql']);
    // No other spelling of the literal anywhere in sql/: every other path calls subagent_context_may_qualify().
    const others = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sql'))
      .flatMap((f) => (readFileSync(join(dir, f), 'utf8').match(/strpos\([^)]*subagent_task[^)]*\)[^\n]*/g) ?? []).map((l) => `${f}: ${l}`))
      .filter((l) => !/strpos\([^,()]+, '{1,2}subagent_task'{1,2}\) > 0/.test(l));
    expect(others).toEqual([]);
  });

  it('the WHEN clause lets through exactly what subagent_context_may_qualify() does', async () => {
    const { rows: [trigger] } = await db.query(
      `SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = 'subagent_context_capture'`);
    const when = /WHEN \((.*)\) EXECUTE FUNCTION/.exec(trigger.def)?.[1];
    expect(when).toBeDefined();
    expect(when).toMatch(/new\.metadata/i);
    const expr = when!.replace(/new\.metadata/gi, 'm');
    const { rows } = await db.query<{ m: string; by_when: boolean; by_function: boolean }>(
      `SELECT m, coalesce((${expr}), false) AS by_when, coalesce(subagent_context_may_qualify(m), false) AS by_function
         FROM unnest($1::text[]) AS m`, [CORPUS]);
    expect(rows.filter((r) => r.by_when !== r.by_function).map((r) => r.m.slice(0, 40))).toEqual([]);
    // Both halves of the filter are exercised: some inputs pass, some do not.
    expect(rows.filter((r) => r.by_when).map((r) => r.m.slice(0, 20))).toEqual([
      '{"normalized":{"kind', 'subagent_task', 'xsubagent_taskx', 'aaaaaaaaaaaaaaaaaaaa']);
    // NULL metadata passes neither (the trigger does not fire).
    const { rows: [n] } = await db.query(`SELECT (${when!.replace(/new\.metadata/gi, 'NULL::text')}) AS w,
      subagent_context_may_qualify(NULL) AS f`);
    expect(n).toEqual({ w: null, f: null });
  });

  it.each([
    ['{"normalized":{"kind":"subagent_task"}}', true],
    ['{"normalized":{"kind":"subagent\\u005ftask"}}', false],  // an escaped spelling is no subagent call
    ['{"normalized":{"kind":"tool_call"}}', false],
    ['{"command":"go test ./... \\u0026\\u0026 echo \\u003cok\\u003e","normalized":{"kind":"shell_exec"}}', false],
    ['streaming text', false],
    ['', false],
  ])('lets %j through: %s', async (metadata, expected) => {
    const { rows } = await db.query('SELECT subagent_context_may_qualify($1) AS pass', [metadata]);
    expect(rows[0].pass).toBe(expected);
  });

  it("health's index on task_session_messages has the same predicate as the WHEN clause", async () => {
    const { rows: [x] } = await db.query(`SELECT
        (SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index AS i
          WHERE i.indexrelid = 'subagent_context_recent_messages_idx'::regclass) AS index_predicate,
        (SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'subagent_context_capture') AS trigger`);
    const when = /WHEN \((.*)\) EXECUTE FUNCTION/.exec(x.trigger)?.[1];
    expect(when!.replace(/new\.metadata/gi, 'metadata')).toBe(x.index_predicate);
    expect(x.index_predicate).toBe("(strpos(metadata, 'subagent_task'::text) > 0)");
  });

  it('an escaped spelling of the kind is no subagent write on any path: no row, no shortfall, nothing to backfill or repair', async () => {
    const escaped = '{"tool_call_id":"toolu_escaped","normalized":{"kind":"subagent\\u005ftask","subagent\\u005ftask":{"status":"completed"}}}';
    await db.query(`INSERT INTO tasks (id, title, created_at, updated_at) VALUES ('te', 't', now(), now());
      INSERT INTO task_sessions (id, task_id, started_at, updated_at) VALUES ('se', 'te', now(), now());
      INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ('ue', 'se', 'te', now(), now(), now())`);
    await db.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, metadata, created_at)
      VALUES ('me', 'se', 'te', 'ue', '', $1, now() AT TIME ZONE 'UTC')`, [escaped]);
    // It is JSON whose kind is subagent_task, but the text never spells it.
    expect((await db.query(`SELECT $1::jsonb #>> '{normalized,kind}' AS kind`, [escaped])).rows[0].kind).toBe('subagent_task');
    expect((await db.query(`SELECT count(*)::int AS n FROM task_session_subagents WHERE tool_call_id = 'toolu_escaped'`)).rows[0].n).toBe(0);
    const health = (await db.query(`SELECT shortfall::int, excess::int FROM subagent_context_health()`)).rows[0];
    expect(health).toEqual({ shortfall: 0, excess: 0 });
    expect((await db.query(`SELECT repaired::int FROM subagent_context_repair()`)).rows[0].repaired).toBe(0);
    // The history walk (backfill) passes it by: subagent_context_store_history reads the same filter.
    await db.query(`SELECT subagent_context_store_history('-infinity', 'infinity', NULL, NULL, NULL)`);
    expect((await db.query(`SELECT count(*)::int AS n FROM task_session_subagents WHERE tool_call_id = 'toolu_escaped'`)).rows[0].n).toBe(0);
  });

  it('a non-subagent write leaves the stats and the table alone', async () => {
    const before = (await db.query('SELECT * FROM subagent_context_stats()')).rows[0];
    await db.query(`INSERT INTO tasks (id, title, created_at, updated_at) VALUES ('t', 't', now(), now());
      INSERT INTO task_sessions (id, task_id, started_at, updated_at) VALUES ('s', 't', now(), now());
      INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ('u', 's', 't', now(), now(), now())`);
    await db.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, metadata, created_at)
      VALUES ('m', 's', 't', 'u', 'hello', '{"normalized":{"kind":"tool_call"}}', now())`);
    await db.query(`UPDATE task_session_messages SET content = 'hello world' WHERE id = 'm'`);
    const after = (await db.query('SELECT * FROM subagent_context_stats()')).rows[0];
    expect(after).toEqual(before);
    expect((await db.query('SELECT count(*)::int AS n FROM task_session_subagents')).rows[0].n).toBe(0);
  });
});
