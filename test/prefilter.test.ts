// The trigger's WHEN clause and subagent_may_qualify() are the same filter written twice (the WHEN
// clause must not call a function whose EXECUTE privilege an operator could revoke, and it is spelled as
// one regular expression because that is cheaper per statement). Pin them together input by input, and
// pin what the filter lets through.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from './helpers/database.js';

const db = await freshDatabase('prefilter', { from: 'installed' });

// Texts on both sides of each part of the filter: the name, near misses of it (a regular expression
// would read `_` or `.` loosely if it were written wrongly), escapes and bare backslashes.
const CORPUS = [
  '{"normalized":{"kind":"subagent_task"}}', 'subagent_task', 'xsubagent_taskx', 'subagent_tas', 'ubagent_task',
  'SUBAGENT_TASK', 'subagentXtask', 'subagent.task', 'subagent-task', 'subagent task', 'subagent_Task',
  '{"k":"subagent\\u005ftask"}', '\\u', 'a\\ub', '\\U0041', '\\\\u', '\\', 'u', '\\n', '\\x',
  '{"normalized":{"kind":"tool_call"}}', 'streaming text', '', 'ü ∑ 😀', 'a'.repeat(100_000) + 'subagent_task',
  // Go's encoding/json escapes (SPEC §2) are not letters of the kind: they stop here.
  '{"command":"cd x \\u0026\\u0026 go test"}', '\\u003cdiv\\u003e', 'a\\u2028b\\u2029', '\\u001b[31m',
  // Escapes of the kind's letters pass, whichever case the hex digits are in.
  '{"kind":"\\u0073ubagent_task"}', '{"kind":"subagent_tas\\u006B"}',
];

describe('the non-subagent fast path', () => {
  it('the WHEN clause lets through exactly what subagent_may_qualify() does', async () => {
    const { rows: [trigger] } = await db.query(
      `SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = 'subagent_context_capture'`);
    const when = /WHEN \((.*)\) EXECUTE FUNCTION/.exec(trigger.def)?.[1];
    expect(when).toBeDefined();
    expect(when).toMatch(/new\.metadata/i);
    const expr = when!.replace(/new\.metadata/gi, 'm');
    const { rows } = await db.query<{ m: string; by_when: boolean; by_function: boolean }>(
      `SELECT m, coalesce((${expr}), false) AS by_when, coalesce(subagent_may_qualify(m), false) AS by_function
         FROM unnest($1::text[]) AS m`, [CORPUS]);
    expect(rows.filter((r) => r.by_when !== r.by_function).map((r) => r.m.slice(0, 40))).toEqual([]);
    // Both halves of the filter are exercised: some inputs pass, some do not.
    expect(rows.filter((r) => r.by_when).length).toBe(7);
    // NULL metadata passes neither (the trigger does not fire).
    const { rows: [n] } = await db.query(`SELECT (${when!.replace(/new\.metadata/gi, 'NULL::text')}) AS w,
      subagent_may_qualify(NULL) AS f`);
    expect(n).toEqual({ w: null, f: null });
  });

  it.each([
    ['{"normalized":{"kind":"subagent_task"}}', true],
    ['{"normalized":{"kind":"subagent\\u005ftask"}}', true],   // an escape could spell it: the parse decides
    ['{"normalized":{"kind":"tool_call"}}', false],
    ['{"command":"go test ./... \\u0026\\u0026 echo \\u003cok\\u003e","normalized":{"kind":"shell_exec"}}', false],
    ['streaming text', false],
    ['', false],
  ])('lets %j through: %s', async (metadata, expected) => {
    const { rows } = await db.query('SELECT subagent_may_qualify($1) AS pass', [metadata]);
    expect(rows[0].pass).toBe(expected);
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
