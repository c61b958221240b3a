// Differential test: random sequences of kandev-shaped message writes go through the real trigger and
// through the reference model (test/model/subagent-model.ts, written from docs/decisions.md#derivation, docs/integration.md, docs/decisions.md#merge-and-identity). The derived rows
// (every column but id) and the stats deltas must be identical. A mismatch fails with the shrunk
// sequence printed as the SQL that was run, next to both row sets.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isDeepStrictEqual, inspect } from 'node:util';
import { freshDatabase } from '../helpers/database.js';
import { ROW_COLUMNS, selectList } from '../model/subagent-table.js';
import {
  CaptureModel, J, type Json, type Message, type MessageWrite, type Metadata, type Row, type Stats,
  metadataText, rowKey, timestampText, zeroStats,
} from '../model/subagent-model.js';

const SEED = 20260812;
const RUNS = 1000;

const db = await freshDatabase('differential', { from: 'installed' });
const client = await db.connect();
// Each write commits on its own (so "last committed frame wins" is exercised as in production); the
// commits need not wait for the disk in a throwaway database.
await client.query(`SET synchronous_commit = off`);
// Capture must not depend on the session time zone; a half-hour offset would show in every timestamp.
await client.query(`SET TimeZone = 'America/St_Johns'`);
// A session and a turn whose id is '': identity and turn_id must treat '' as missing.
await client.query(`
  INSERT INTO tasks (id, title, created_at, updated_at) VALUES ('task-empty', 'x', '2026-08-12', '2026-08-12');
  INSERT INTO task_sessions (id, task_id, started_at, updated_at) VALUES ('', 'task-empty', '2026-08-12', '2026-08-12');
  INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
    VALUES ('', '', 'task-empty', '2026-08-12', '2026-08-12', '2026-08-12');`);

// ---------------------------------------------------------------------------------------------------
// Generators: documents are built as Json trees, numbers as the exact lexemes written.

/** Weighted choice among constants. */
const pick = <T>(...choices: [number, T][]) =>
  fc.oneof(...choices.map(([weight, v]) => ({ weight, arbitrary: fc.constant(v) })));

/** A text field: usually one of a few strings (so frames overwrite each other), sometimes not a string. */
const textValue = (...strings: string[]) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...strings).map((s) => J.str(s)) },
    { weight: 2, arbitrary: fc.constant(J.str('')) },
    { weight: 1, arbitrary: fc.constantFrom(J.num('5'), J.null, J.bool(true), J.obj([]), J.str('say "hi" \\ é ✓'), J.str('😀 ok'), J.str('😀 ok', true)) },
  );

const metricLexemes = [
  '0', '-0', '7', '48211', '275717', '-5', '1.5', '2.0', '1e2', '1E2', '1.5e1', '100e-2', '1e30',
  '9223372036854775807', '9223372036854775808', '-9223372036854775808', '-0.0', '1.5E+1', '0.0',
];
const metricValue = fc.oneof(
  { weight: 10, arbitrary: fc.constantFrom(...metricLexemes).map(J.num) },
  { weight: 1, arbitrary: fc.constantFrom(J.null, J.str('12'), J.bool(true), J.obj([]), J.arr()) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 1_000_000 }).map((n) => J.num(String(n))) },
);

const isAsyncValue = fc.constantFrom(
  J.bool(true), J.num('1'), J.str('true'), J.bool(false), J.str('1'), J.num('1.0'), J.num('1e0'),
  J.str('TRUE'), J.num('0'), J.null, J.str('true', true), J.num('0.1e1'), J.num('10e-1'),
);

const toolStatusValue = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('complete', 'completed', 'success', 'error', 'failed', 'cancelled').map((s) => J.str(s)) },
  { weight: 6, arbitrary: fc.constantFrom('pending', 'in_progress', 'Completed', 'completed ', 'canceled', 'done', 'FAILED').map((s) => J.str(s)) },
  { weight: 1, arbitrary: fc.constantFrom(J.str(''), J.null, J.num('1'), J.str('completed', true)) },
);

const toolCallIdValue = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom('toolu_A', 'toolu_B', 'toolu_C').map((s) => J.str(s)) },
  { weight: 1, arbitrary: fc.constantFrom(J.str(''), J.null, J.num('7')) },
);

const executionIdValue = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('exec-1', 'exec-2', 'unknown').map((s) => J.str(s)) },
  { weight: 1, arbitrary: fc.constantFrom(J.str(''), J.null, J.num('5')) },
);

/** An optional member: absent, or [key, value]. */
const optional = (key: string, value: fc.Arbitrary<Json>, presentWeight = 2) =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant([] as [string, Json][]) },
    { weight: presentWeight, arbitrary: value.map((v) => [[key, v]] as [string, Json][]) },
  );

const members = (...parts: fc.Arbitrary<[string, Json][]>[]) =>
  fc.tuple(...parts).map((ps) => ps.flat());

const subagentTaskMembers = members(
  optional('description', textValue('review the diff', 'write tests')),
  optional('prompt', textValue('not stored')),
  optional('subagent_type', textValue('security-reviewer', 'general-purpose')),
  optional('status', textValue('async_launched', 'completed', 'started', 'running')),
  optional('agent_id', textValue('a1b2', 'c3d4')),
  optional('model', textValue('claude-opus-5[1m]', 'gpt-6')),
  optional('child_session_id', textValue('ses_1', 'ses_2')),
  optional('total_tokens', metricValue),
  optional('tool_use_count', metricValue),
  optional('duration_ms', metricValue),
  optional('is_async', isAsyncValue),
  optional('result_text', textValue('not stored')),
);

const subagentTaskObject = fc
  .tuple(subagentTaskMembers, pick([12, false], [1, true]))
  .map(([entries, escapeKeys]) => J.obj(entries, escapeKeys));

const subagentTask = fc.oneof(
  { weight: 12, arbitrary: subagentTaskObject },
  { weight: 1, arbitrary: fc.constantFrom(J.null, J.arr(J.num('1')), J.str('x')) },
);

const kindValue = fc.oneof(
  { weight: 16, arbitrary: fc.constant(J.str('subagent_task')) },
  { weight: 2, arbitrary: fc.constant(J.str('subagent_task', true)) }, // spelled with \u escapes
  { weight: 3, arbitrary: fc.constantFrom(J.str('tool_call'), J.str('Subagent_task'), J.str('subagent_task '), J.num('1')) },
);

const normalizedValue = fc.oneof(
  { weight: 12, arbitrary: members(fc.constant([]), optional('kind', kindValue, 30), optional('subagent_task', subagentTask, 6)).map(J.obj) },
  { weight: 1, arbitrary: fc.constantFrom(J.str('subagent_task'), J.arr(J.str('subagent_task'))) },
);

/** A tool-call frame: top-level members in kandev's order, sometimes a repeated status (jsonb keeps the last). */
const frameDocument = fc
  .tuple(
    members(
      optional('tool_call_id', toolCallIdValue, 12),
      optional('title', fc.constant(J.str('Task'))),
      optional('status', toolStatusValue, 4),
      optional('parent_tool_call_id', textValue('toolu_parent'), 1),
      optional('agent_execution_id', executionIdValue, 1),
      optional('normalized', normalizedValue, 30),
    ),
    fc.oneof({ weight: 12, arbitrary: fc.constant([] as [string, Json][]) }, { weight: 1, arbitrary: optional('status', toolStatusValue, 1) }),
    pick([12, false], [1, true]), // keys written as \u escapes
    // Rarely, something jsonb cannot hold: the whole document then does not qualify.
    fc.oneof(
      { weight: 40, arbitrary: fc.constant([] as [string, Json][]) },
      {
        weight: 1,
        arbitrary: fc.constantFrom<[string, Json][]>(
          [['note', J.str('nul \u0000 here')]], [['huge', J.num('1e999999')]],
          [['note', J.str('half \ud83d')]], [['note', J.str('\ude00 half', true)]]),
      },
    ),
  )
  .map(([main, repeated, escapeKeys, hostile]) => J.obj([...main, ...repeated, ...hostile], escapeKeys));

const metadataValue: fc.Arbitrary<Metadata> = fc.oneof(
  { weight: 20, arbitrary: frameDocument.map((json) => ({ json })) },
  { weight: 1, arbitrary: fc.constantFrom<Metadata>({ json: J.null }, { json: J.arr() }, { json: J.str('subagent_task') }, { json: J.obj([]) }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Metadata>(
      { notJson: null }, { notJson: '' }, { notJson: 'not json' },
      { notJson: '{"tool_call_id":"toolu_A","normalized":{"kind":"subagent_task"}' }, // truncated
      { notJson: '{"tool_call_id":"toolu_A","normalized":{"kind":"subagent_t\\u0061sk"},}' }, // trailing comma
    ),
  },
);

const BASE = Date.parse('2026-08-12T09:00:00Z') * 1000; // µs
/** A time within a few seconds of BASE, often with microseconds, sometimes on a round value. */
const instant = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 4_000_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 500_000, 1_000_000, 1_250_000, 2_000_000) },
).map((d) => BASE + d);

/** One write: to one of a few message ids; the first write of an id is its INSERT, later ones UPDATE it
 *  (or DELETE it, after which the next write INSERTs it again). */
const writeSpec = fc.record({
  message: fc.integer({ min: 0, max: 3 }),
  delete: pick([14, false], [1, true]),
  // Usually each write is its own transaction; sometimes it joins the previous write's transaction.
  joinsPreviousTransaction: pick([4, false], [1, true]),
  // set_config('subagent_context.agent_execution_id', …, true) just before this write (null: not called);
  // it lasts until the end of the transaction.
  setConfig: pick<string | null>([6, null], [1, ''], [2, 'exec-1'], [2, 'exec-2']),
  session: pick<0 | 1 | 'empty'>([6, 0], [3, 1], [1, 'empty' as const]),
  task: pick<'own' | 'other' | '' | null>([8, 'own'], [1, 'other'], [1, ''], [1, null]),
  turn: pick<0 | 1 | 'empty'>([4, 0], [3, 1], [1, 'empty' as const]),
  createdAt: instant,
  updatedAt: instant,
  metadata: metadataValue,
  // Which extra columns an UPDATE also sets (kandev rewrites only metadata and updated_at).
  moves: fc.record({
    turn: pick([5, false], [1, true]),
    task: pick([9, false], [1, true]),
    createdAt: pick([9, false], [1, true]),
  }),
});
type WriteSpec = typeof writeSpec extends fc.Arbitrary<infer T> ? T : never;

const sequence = fc.array(writeSpec, { minLength: 1, maxLength: 14 });

// ---------------------------------------------------------------------------------------------------
// Running a sequence

let runNumber = 0;

/** A write as the SQL runs it: which transaction, and whether set_config is called just before it. */
interface Step {
  write: MessageWrite;
  beginsTransaction: boolean;
  setConfig: string | null;
}

/** Concrete writes with ids private to this run (so runs share one database without interfering). */
function concreteWrites(specs: WriteSpec[], run: string): { steps: Step[]; sessions: string[] } {
  const sessions = [`${run}-s0`, `${run}-s1`];
  const sessionId = (s: WriteSpec['session']) => (s === 'empty' ? '' : sessions[s]);
  const taskId = (w: WriteSpec, session: string) =>
    w.task === 'own' ? (session === '' ? 'task-empty' : `${session}-task`) : w.task === 'other' ? `${run}-other-task` : w.task;
  const turnId = (t: WriteSpec['turn'], session: string) => (t === 'empty' ? '' : `${session === '' ? run : session}-t${t}`);
  const live = new Map<string, string>(); // message id -> its session, while the message exists
  let setting: string | null = null; // the transaction's current execution setting
  const steps: Step[] = [];
  for (const w of specs) {
    const id = `${run}-m${w.message}`;
    const session = live.get(id);
    if (session === undefined && w.delete) continue; // nothing to delete
    const beginsTransaction = steps.length === 0 || !w.joinsPreviousTransaction;
    if (beginsTransaction) setting = null;
    if (w.setConfig !== null) setting = w.setConfig;
    const step = (write: MessageWrite) => steps.push({ write, beginsTransaction, setConfig: w.setConfig });
    if (session === undefined) {
      const s = sessionId(w.session);
      live.set(id, s);
      const message: Message = {
        id, task_session_id: s, task_id: taskId(w, s), turn_id: turnId(w.turn, s),
        metadata: w.metadata, created_at: w.createdAt, updated_at: w.updatedAt,
      };
      step({ op: 'insert', message, executionSetting: setting });
    } else if (w.delete) {
      live.delete(id);
      step({ op: 'delete', id, executionSetting: setting });
    } else {
      const set: Extract<MessageWrite, { op: 'update' }>['set'] = { metadata: w.metadata, updated_at: w.updatedAt };
      if (w.moves.turn) set.turn_id = turnId(w.turn, session);
      if (w.moves.task) set.task_id = taskId(w, session);
      if (w.moves.createdAt) set.created_at = w.createdAt;
      step({ op: 'update', id, set, executionSetting: setting });
    }
  }
  return { steps, sessions };
}

const literal = (v: string | null) => (v === null ? 'NULL' : `'${v.replaceAll("'", "''")}'`);
const ts = (micros: number) => literal(timestampText(micros));

/** The SQL a host would run for a sequence: fixture rows, then the writes in their transactions. */
function script(steps: Step[], sessions: string[], run: string): string {
  const setup = sessions.map((s) => `
    INSERT INTO tasks (id, title, created_at, updated_at) VALUES ('${s}-task', 't', '2026-08-12', '2026-08-12');
    INSERT INTO task_sessions (id, task_id, started_at, updated_at) VALUES ('${s}', '${s}-task', '2026-08-12', '2026-08-12');
    INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES
      ('${s}-t0', '${s}', '${s}-task', '2026-08-12', '2026-08-12', '2026-08-12'),
      ('${s}-t1', '${s}', '${s}-task', '2026-08-12', '2026-08-12', '2026-08-12');`).join('');
  // Turns used by messages in the '' session.
  const emptySessionTurns = `
    INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES
      ('${run}-t0', '', 'task-empty', '2026-08-12', '2026-08-12', '2026-08-12'),
      ('${run}-t1', '', 'task-empty', '2026-08-12', '2026-08-12', '2026-08-12');`;
  const writes = steps.map((s, i) =>
    (s.beginsTransaction ? (i > 0 ? '\nCOMMIT;' : '') + '\nBEGIN;' : '') +
    (s.setConfig === null ? '' : `\nSELECT set_config('subagent_context.agent_execution_id', ${literal(s.setConfig)}, true);`) +
    '\n' + writeSql(s.write));
  return setup + emptySessionTurns + writes.join('') + (steps.length ? '\nCOMMIT;' : '');
}

function writeSql(w: MessageWrite): string {
  switch (w.op) {
    case 'insert': {
      const m = w.message;
      return `INSERT INTO task_session_messages
      (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
      VALUES (${literal(m.id)}, ${literal(m.task_session_id)}, ${literal(m.task_id)}, ${literal(m.turn_id)},
              'agent', '', 'tool_call', ${literal(metadataText(m.metadata))}, ${ts(m.created_at)}, ${ts(m.updated_at)});`;
    }
    case 'update': {
      const sets = [`metadata = ${literal(metadataText(w.set.metadata!))}`, `updated_at = ${ts(w.set.updated_at!)}`];
      if (w.set.turn_id !== undefined) sets.push(`turn_id = ${literal(w.set.turn_id)}`);
      if (w.set.task_id !== undefined) sets.push(`task_id = ${literal(w.set.task_id)}`);
      if (w.set.created_at !== undefined) sets.push(`created_at = ${ts(w.set.created_at)}`);
      return `UPDATE task_session_messages SET ${sets.join(', ')} WHERE id = ${literal(w.id)};`;
    }
    case 'delete':
      return `DELETE FROM task_session_messages WHERE id = ${literal(w.id)};`;
  }
}

const COLUMNS = selectList(ROW_COLUMNS);

const byKey = (rows: Row[]) => [...rows].sort((a, b) => (rowKey(a) < rowKey(b) ? -1 : rowKey(a) > rowKey(b) ? 1 : 0));

async function readStats(): Promise<Stats> {
  const { rows } = await client.query(`SELECT * FROM subagent_context_stats()`);
  return rows[0];
}

const minus = (a: Stats, b: Stats): Stats =>
  Object.fromEntries(Object.keys(a).map((k) => [k, a[k as keyof Stats] - b[k as keyof Stats]])) as unknown as Stats;

let statsBefore: Stats = zeroStats();
const totals = { writes: 0, qualifying: 0, rows: 0 };
/** How often the generator reached each case worth comparing (a case never reached proves nothing). */
const reached: Record<string, number> = {};
const saw = (what: string, yes: boolean) => { if (yes) reached[what] = (reached[what] ?? 0) + 1; };

function tally(rows: Row[], stats: Stats) {
  saw('write skipped for missing identity', stats.skipped_no_identity > 0n);
  saw('write with an anomalous metric', stats.anomalous_value > 0n);
  saw('row under an execution id from metadata or set_config', rows.some((r) => r.agent_execution_id !== 'unknown'));
  saw('one tool call under two executions', new Set(rows.map((r) => r.task_session_id + r.tool_call_id)).size < rows.length);
  saw('settled row', rows.some((r) => r.settled_at !== null));
  saw('settled row that later frames kept updating', rows.some((r) => r.settled_at !== null && r.settled_at < r.updated_at));
  saw('is_async 1', rows.some((r) => r.is_async === 1));
  saw('tool_use_count 0', rows.some((r) => r.tool_use_count === 0n));
  saw('bigint max tokens', rows.some((r) => r.total_tokens === 9223372036854775807n));
  saw('turn_id NULL', rows.some((r) => r.turn_id === null));
  saw('all metrics NULL', rows.some((r) => r.total_tokens === null && r.tool_use_count === null && r.duration_ms === null));
}

/** One sequence through both implementations; throws a readable report on any difference. */
async function check(specs: WriteSpec[]): Promise<void> {
  const run = `r${++runNumber}`;
  const { steps, sessions } = concreteWrites(specs, run);
  const model = new CaptureModel();
  for (const s of steps) model.apply(s.write);

  const sql = script(steps, sessions, run);
  await client.query(sql);
  const { rows } = await client.query(
    `SELECT ${COLUMNS} FROM task_session_subagents WHERE task_session_id = ANY($1) OR task_id LIKE $2`,
    [sessions, `${run}-%`]);
  const statsAfter = await readStats();
  const delta = minus(statsAfter, statsBefore);
  statsBefore = statsAfter;

  const expected = byKey([...model.rows.values()]);
  const actual = byKey(rows);
  const sameRows = isDeepStrictEqual(actual, expected);
  const sameStats = isDeepStrictEqual({ ...delta }, { ...model.stats });
  const identity = delta.attempted === delta.skipped_no_identity + delta.persisted + delta.failed;
  totals.writes += steps.length;
  totals.qualifying += Number(model.stats.attempted);
  totals.rows += expected.length;
  tally(expected, model.stats);
  saw('message deleted, then inserted again', steps.some((s, i) =>
    s.write.op === 'delete' && steps.slice(i + 1).some((t) => t.write.op === 'insert' && t.write.message.id === (s.write as { id: string }).id)));
  saw('transaction of several writes, execution set once', steps.some((s, i) =>
    !s.beginsTransaction && s.setConfig === null && steps[i - 1].setConfig !== null && s.write.op !== 'delete'));
  if (sameRows && sameStats && identity) return;

  throw new Error([
    `SQL and model disagree (${!sameRows ? 'rows' : ''}${!sameStats ? ' stats' : ''}${!identity ? ' identity' : ''})`,
    `-- writes:${sql}`,
    `-- SQL rows: ${inspect(actual, { depth: 4, breakLength: 140 })}`,
    `-- model rows: ${inspect(expected, { depth: 4, breakLength: 140 })}`,
    `-- SQL stats delta: ${inspect(delta)}`,
    `-- model stats: ${inspect(model.stats)}`,
  ].join('\n'));
}

describe('differential: the trigger against the reference model', () => {
  it(`${RUNS} random write sequences give the model's rows and stats, column for column`, async () => {
    statsBefore = await readStats();
    const started = performance.now();
    await fc.assert(fc.asyncProperty(sequence, check), { seed: SEED, numRuns: RUNS, verbose: false });
    const seconds = (performance.now() - started) / 1000;
    console.log(`differential: ${RUNS} sequences, ${totals.writes} writes, ${totals.qualifying} qualifying, ` +
      `${totals.rows} rows in ${seconds.toFixed(1)} s`);
    // The generator must actually reach the interesting cases, or the comparison proves little.
    expect(totals.qualifying).toBeGreaterThan(totals.writes / 2);
    expect(totals.rows).toBeGreaterThan(RUNS);
    console.log('differential: cases reached (sequences):', reached);
    for (const [what, times] of Object.entries(reached)) expect(times, what).toBeGreaterThanOrEqual(10);
    expect(Object.keys(reached)).toHaveLength(13);

    // Over the whole run, the stats identity holds on the absolute counters too.
    const s = await readStats();
    expect(s.attempted).toBe(s.skipped_no_identity + s.persisted + s.failed);
    expect(s.failed).toBe(0n);
  });
});
