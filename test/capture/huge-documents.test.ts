// A message of any size is the host's to write (docs/reliability.md#huge-documents): no path of ours that
// reads the metadata (the trigger's WHEN clause, health's index predicate, the trigger, the backfill,
// health, the reconciliation, repair, report) may fail on a document at the edge of what PostgreSQL holds,
// whatever the capture prefilter is made of. A regular expression over a text of more than 268,435,455
// characters raises "invalid memory alloc request size"; jsonb refuses a document past its own limits.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, subagentMetadata } from '../../kandev/host.js';

const db = await freshDatabase('huge_documents', { from: 'host' });
const cli = builtCli();
const t = await createTurn(db.pool, 'public', 'huge');

/** The documents, built in the server (each is hundreds of MB). */
const DOCUMENTS: Record<string, string> = {
  // 268,435,464 characters of JSON escapes, no subagent_task: the issue's own example.
  escapes: `'{"a":"' || repeat('\\u0061', 44739243) || '"}'`,
  // A subagent frame past jsonb's limit on a document's size: it does not parse, so it does not qualify.
  refused: `'{"tool_call_id":"toolu_SUFFIX","normalized":{"kind":"subagent_task"},"a":"' || repeat('x', 150000000)
            || '","b":"' || repeat('y', 150000000) || '"}'`,
};

const FRAME = (id: string) => subagentMetadata({ tool_call_id: id, status: 'pending', subagent: { description: 'small' } });

async function write(suffix: string) {
  for (const [name, doc] of Object.entries(DOCUMENTS)) {
    await db.query(
      `INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 'agent', '', 'tool_call', ${doc.replace('SUFFIX', `${name}_${suffix}`)}, $5, $5)`,
      [`${name}-${suffix}`, t.session, t.task, t.turn, suffix === 'before' ? '2026-08-01 09:00:00' : '2027-08-01 09:00:00']);
  }
}

describe('documents at the edge of what PostgreSQL holds', () => {
  it('already in the table: `up` installs, builds a valid index and backfills', async () => {
    await write('before');
    await db.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                    VALUES ('small-before', $1, $2, $3, 'agent', '', 'tool_call', $4, '2026-08-01 09:00:00', '2026-08-01 09:00:00')`,
      [t.session, t.task, t.turn, FRAME('toolu_small_before')]);
    const r = await runCli(cli, ['up', '--database-url', db.url, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).backfill).toMatchObject({ status: 'activated', inserted: 1 });
    const { rows } = await db.query(`SELECT indisvalid FROM pg_index WHERE indexrelid = 'subagent_context_recent_messages_idx'::regclass`);
    expect(rows).toEqual([{ indisvalid: true }]);
  }, 300_000);

  it('written and rewritten live: every write commits, and capture goes on', async () => {
    await write('after');
    await db.query(`UPDATE task_session_messages SET updated_at = '2027-08-01 09:00:01' WHERE id = 'escapes-after'`);
    await db.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                    VALUES ('small-after', $1, $2, $3, 'agent', '', 'tool_call', $4, '2027-08-01 09:00:00', '2027-08-01 09:00:00')`,
      [t.session, t.task, t.turn, FRAME('toolu_small_after')]);
    const { rows } = await db.query(`SELECT tool_call_id, source FROM task_session_subagents ORDER BY tool_call_id`);
    expect(rows).toEqual([
      { tool_call_id: 'toolu_small_after', source: 'live' },
      { tool_call_id: 'toolu_small_before', source: 'backfill' },
    ]);
    // The frame past capture_max_bytes was not parsed inside the write: its capture is deferred to repair
    // (docs/reliability.md#large-documents), the only failure recorded.
    expect((await db.query(`SELECT message_id, sqlstate, left(message, 16) AS message FROM subagent_context_failures`)).rows)
      .toEqual([{ message_id: 'refused-after', sqlstate: '54000', message: 'capture deferred' }]);
  }, 300_000);

  // Health's own comparison does not parse a document capture deferred (larger than capture_max_bytes):
  // its cost is bounded in documents' size as in their count; the deferral is counted in `failures`.
  it('health, repair and report read past them', async () => {
    const health = await runCli(cli, ['health', '--database-url', db.url, '--json']);
    expect(health.stderr).toBe('');
    expect(JSON.parse(health.stdout)).toMatchObject({ shortfall: 0, failures: 1 });
    const repair = await runCli(cli, ['repair', '--database-url', db.url]);
    expect(repair.stderr).toBe('');
    expect(repair.code).toBe(0);
    // The deferred frame does not parse: nothing to replay, marked replayed.
    const after = await runCli(cli, ['health', '--database-url', db.url, '--json']);
    expect(JSON.parse(after.stdout)).toMatchObject({ status: 'healthy', shortfall: 0, failures: 0 });
    const report = await runCli(cli, ['report', '--database-url', db.url, '--json']);
    expect(report.stderr).toBe('');
    expect(report.code).toBe(0);
  }, 300_000);

  it('a complete reconciliation walks past them and finds nothing missing', async () => {
    // The run compares [capture_since, now): moved back before the history written above (its huge
    // documents at 2026-08-01; the live ones are dated 2027, health's recent part reads those).
    await db.query(`UPDATE kandev_meta SET value = '2026-01-01T00:00:00.000000000Z' WHERE key = 'subagent_context_capture_since'`);
    const { rows: [{ now }] } = await db.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS now`);
    let step: { status: string; missing: number; compared: number };
    do {
      step = (await db.query(`SELECT status, missing::int, messages_compared::int AS compared
                                FROM subagent_context_reconcile($1::timestamp)`, [now])).rows[0] as typeof step;
    } while (step.status === 'stepped');
    expect(step).toMatchObject({ status: 'completed', missing: 0 });
    expect(step.compared).toBeGreaterThan(0);
  }, 300_000);
});
