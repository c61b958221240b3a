// The trigger's WHEN clause and subagent_may_qualify() are the same filter written twice (the WHEN
// clause must not call a function whose EXECUTE privilege an operator could revoke). Pin them together,
// and pin what the filter lets through.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from './helpers/database.js';

const db = await freshDatabase('prefilter');
await db.createHost();
await db.up();

/** An expression with whitespace, casts and redundant parentheses removed, for comparison. */
function normalize(expr: string): string {
  return expr.replace(/::text/g, '').replace(/new\.metadata|metadata/gi, 'M').replace(/[\s()]/g, '').toLowerCase();
}

describe('the non-subagent fast path', () => {
  it('the WHEN clause is the same expression as subagent_may_qualify()', async () => {
    const { rows: [trigger] } = await db.query(
      `SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = 'subagent_context_capture'`);
    const when = /WHEN \((.*)\) EXECUTE FUNCTION/.exec(trigger.def)?.[1];
    expect(when).toBeDefined();
    const { rows: [fn] } = await db.query(
      `SELECT prosrc FROM pg_proc WHERE proname = 'subagent_may_qualify'`);
    const body = /SELECT (.*)$/s.exec(fn.prosrc.trim())?.[1];
    expect(normalize(when!)).toBe(normalize(body!.replace(/E'\\\\u'/, "'\\u'")));
  });

  it.each([
    ['{"normalized":{"kind":"subagent_task"}}', true],
    ['{"normalized":{"kind":"subagent\\u005ftask"}}', true],   // an escape could spell it: the parse decides
    ['{"normalized":{"kind":"tool_call"}}', false],
    ['streaming text', false],
    ['', false],
  ])('lets %j through: %s', async (metadata, expected) => {
    const { rows } = await db.query('SELECT subagent_may_qualify($1) AS pass', [metadata]);
    expect(rows[0].pass).toBe(expected);
  });

  it('a non-subagent write leaves the stats and the table alone', async () => {
    const before = (await db.query('SELECT * FROM subagent_context_stats()')).rows[0];
    await db.query(`INSERT INTO tasks VALUES ('t', 't', now(), now());
      INSERT INTO task_sessions VALUES ('s', 't', now(), now());
      INSERT INTO task_session_turns VALUES ('u', 's', 't', now(), now(), now())`);
    await db.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, metadata, created_at)
      VALUES ('m', 's', 't', 'u', 'hello', '{"normalized":{"kind":"tool_call"}}', now())`);
    await db.query(`UPDATE task_session_messages SET content = 'hello world' WHERE id = 'm'`);
    const after = (await db.query('SELECT * FROM subagent_context_stats()')).rows[0];
    expect(after).toEqual(before);
    expect((await db.query('SELECT count(*)::int AS n FROM task_session_subagents')).rows[0].n).toBe(0);
  });
});
