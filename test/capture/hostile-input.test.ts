// Hostile metadata (docs/integration.md, docs/decisions.md#derivation, docs/reliability.md; docs/decisions.md "Derivation"): a deterministic corpus of
// documents, each written as an INSERT then an UPDATE of one message. Every write commits, the metadata
// is stored byte for byte, and the derived row is what the reference model (test/model/subagent-model.ts,
// an independent TypeScript reading of the docs) says it is (or there is no row). A second schema carries kandev's metadata expression index: there a
// document that is not valid jsonb fails in the host's index before any trigger runs (the host's
// behaviour, asserted), and every other document behaves exactly as without the index.
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { freshDatabase } from '../helpers/database.js';
import { seededRandom } from '../../kandev/random.js';
import { CaptureModel, jsonbRefusal, member, microsOf, parseMetadata, type Metadata, type Outcome } from '../model/subagent-model.js';

const db = await freshDatabase('hostile_input', { from: 'installed' });
await db.createHost('hostidx', { metadataIndexes: true });
await db.up('hostidx');
await db.createHost('kandev091', { shape: 'kandev-0.91' });
await db.up('kandev091');

// ---------------------------------------------------------------------------------------------------
// The corpus.
// ---------------------------------------------------------------------------------------------------

const prng = seededRandom;
const rand = prng(0x5ab_a6e7);
const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_';
const MB = 1 << 20;
/** 1 MB of seeded random characters: nothing a compressor can shrink into an index entry. */
const megabyte = () => Array.from({ length: MB }, () => ALPHABET[Math.floor(rand() * 64)]).join('');

const REAL = {
  tool_call_id: 'toolu_01Hostile', title: 'Task', status: 'completed', parent_tool_call_id: 'toolu_00Parent',
  normalized: {
    kind: 'subagent_task',
    subagent_task: {
      description: 'review the diff', prompt: 'look for bugs', subagent_type: 'security-reviewer', status: 'completed',
      agent_id: 'a1b2', model: 'claude-opus-5[1m]', child_session_id: 'ses_1', total_tokens: 48211,
      tool_use_count: 0, duration_ms: 91234, is_async: true, result_text: 'ok', output_file: '/tmp/out',
    },
  },
};
const REAL_TEXT = JSON.stringify(REAL);

const PLACEHOLDER = '__hostile_placeholder__';
/** REAL with the value at `path` replaced by raw JSON text (which may be anything, even invalid). */
type Doc = Record<string, unknown>;
function withRaw(path: string[], raw: string, base: Doc = REAL): string {
  const doc = structuredClone(base);
  let o = doc;
  for (const p of path.slice(0, -1)) o = o[p] as Doc;
  o[path[path.length - 1]] = PLACEHOLDER;
  return JSON.stringify(doc).replace(JSON.stringify(PLACEHOLDER), () => raw);
}
function without(path: string[]): string {
  const doc: Doc = structuredClone(REAL);
  let o = doc;
  for (const p of path.slice(0, -1)) o = o[p] as Doc;
  delete o[path[path.length - 1]];
  return JSON.stringify(doc);
}

interface Case { label: string; metadata: string | null; task?: string | null }
const corpus: Case[] = [];
const add = (label: string, metadata: string | null, task?: string | null) => corpus.push({ label, metadata, task });

add('the real document', REAL_TEXT);
for (const t of ['', 'null', '[]', '{}', 'true', 'false', '0', '-1', '"subagent_task"', ' ', '\n\t', 'not json', '{',
  '}', '[', '"', 'nul', 'undefined', 'NaN', 'Infinity', "{'a':1}", '{"a":1,}', '[1,]', '{"a" 1}', '{"a":01}', '{"a":+1}',
  '{"a":.5}', '{"a":5.}', '{"a":0x10}', '{"a":1e}', '{"a":-}', '/* c */ {}', '{} // c', '\ufeff{}', '{}x', '{}{}', '{"a":"\t"}',
  '{"a":"\\x"}', '{"a":"\\u12"}', '{"a":"\\u00zz"}', '{"normalized":{"kind":"subagent_task"}}',
  '{"tool_call_id":"t","normalized":{"kind":"subagent_task"}}', '{"tool_call_id":"t","normalized":{"kind":"subagent_task","subagent_task":null}}']) {
  add(`literal ${JSON.stringify(t)}`, t);
}
add('SQL NULL', null);
add('whitespace around the document', ` \n\t${REAL_TEXT}\r\n `);
add('the real document inside an array', `[${REAL_TEXT}]`);
add('the real document as a JSON string', JSON.stringify(REAL_TEXT));
add('two documents back to back', REAL_TEXT + REAL_TEXT);
add('trailing garbage', REAL_TEXT + 'x');
for (let cut = 0; cut < REAL_TEXT.length; cut++) add(`truncated at ${cut}`, REAL_TEXT.slice(0, cut));

// 1 MB in every text field.
for (const path of [['tool_call_id'], ['title'], ['status'], ['parent_tool_call_id'], ['agent_execution_id'],
  ['normalized', 'kind'], ...['description', 'prompt', 'subagent_type', 'status', 'agent_id', 'model', 'child_session_id',
    'result_text', 'output_file'].map((f) => ['normalized', 'subagent_task', f])]) {
  add(`1 MB in ${path.join('.')}`, withRaw(path, JSON.stringify(megabyte())));
}

// Deep nesting (5000 levels).
const deepArray = '['.repeat(5000) + ']'.repeat(5000);
const deepObject = '{"a":'.repeat(4999) + '{}' + '}'.repeat(4999);
add('5000 nested arrays', deepArray);
add('5000 nested objects', deepObject);
add('deep array as description', withRaw(['normalized', 'subagent_task', 'description'], deepArray));
add('deep object as total_tokens', withRaw(['normalized', 'subagent_task', 'total_tokens'], deepObject));
add('deep array beside the call', withRaw(['title'], deepArray));
add('deep object as normalized', withRaw(['normalized'], deepObject));

// Numbers, and everything that is not a number, in every metric.
const METRIC_VALUES = ['48211', '"123"', '"48211"', '1e400', '9223372036854775807', '9223372036854775808',
  '-9223372036854775808', '-1', '0', '-0', '0.0', '1.5', '2.0', '1e2', '1E+2', '1.5e1', '1.50e1', '100e-2', '1e-2',
  '275717', '123456789012345678901234567890', '1e200000', 'true', 'false', 'null', '{}', '{"n":1}', '[]', '[1]', '""'];
for (const metric of ['total_tokens', 'tool_use_count', 'duration_ms']) {
  for (const v of METRIC_VALUES) add(`${metric} = ${v}`, withRaw(['normalized', 'subagent_task', metric], v));
  add(`${metric} absent`, without(['normalized', 'subagent_task', metric]));
}
for (const v of ['true', '1', '"true"', '1.0', '"1"', '"TRUE"', 'false', '0', 'null', '1e0', '0.1e1', '10e-1', '{}', '[]', '"yes"', '2']) {
  add(`is_async = ${v}`, withRaw(['normalized', 'subagent_task', 'is_async'], v));
}
add('is_async absent', without(['normalized', 'subagent_task', 'is_async']));

// Wrong types for every key.
const WRONG = ['42', '-1', '1.5', 'true', 'false', 'null', '{}', '{"a":1}', '[]', '["x"]', '""', '"  "'];
for (const path of [['tool_call_id'], ['status'], ['parent_tool_call_id'], ['agent_execution_id'], ['normalized'],
  ['normalized', 'kind'], ['normalized', 'subagent_task'],
  ...['description', 'subagent_type', 'status', 'agent_id', 'model', 'child_session_id'].map((f) => ['normalized', 'subagent_task', f])]) {
  for (const v of WRONG) add(`${path.join('.')} = ${v}`, withRaw(path, v));
}
for (const v of ['"SUBAGENT_TASK"', '"Subagent_Task"', '"subagent_task "', '" subagent_task"', '"subagent-task"',
  '"subagent_tasks"', '["subagent_task"]', '{"subagent_task":1}', '"subagent\\u005ftask"', '"subagent\\u005Ftask"',
  '"\\u0073ubagent_task"', '"\\u0073\\u0075\\u0062\\u0061\\u0067\\u0065\\u006e\\u0074\\u005f\\u0074\\u0061\\u0073\\u006b"',
  '"subagent\\/task"', '"subagent_task\\u0000"', '"subagent\\u005f\\u0074ask"']) {
  add(`kind = ${v}`, withRaw(['normalized', 'kind'], v));
}
add('"normalized" spelled with an escape', REAL_TEXT.replace('"normalized"', '"norm\\u0061lized"'));
add('"kind" spelled with an escape', REAL_TEXT.replace('"kind"', '"ki\\u006ed"'));
add('"tool_call_id" spelled with an escape', REAL_TEXT.replace('"tool_call_id"', '"tool\\u005fcall_id"'));
add('"subagent_task" key spelled with an escape', REAL_TEXT.replace('"subagent_task":{', '"subagent\\u005ftask":{'));
add('kind given twice, last is another kind', REAL_TEXT.replace('"kind":"subagent_task"', '"kind":"subagent_task","kind":"tool"'));
add('kind given twice, last is subagent_task', REAL_TEXT.replace('"kind":"subagent_task"', '"kind":"tool","kind":"subagent_task"'));
add('tool_call_id given twice', REAL_TEXT.replace('"tool_call_id":"toolu_01Hostile"', '"tool_call_id":"first","tool_call_id":"second"'));
add('a "__proto__" key', REAL_TEXT.replace('{"tool_call_id"', '{"__proto__":{"tool_call_id":"proto"},"tool_call_id"'));
for (const s of ['completed', 'complete', 'success', 'error', 'failed', 'cancelled', 'Completed', 'COMPLETE', ' completed',
  'done', 'canceled', 'pending', 'in_progress', '']) add(`status = ${JSON.stringify(s)}`, withRaw(['status'], JSON.stringify(s)));
for (const v of ['"exec-1"', '""', '5', 'null', '"unknown"', '"  "']) add(`agent_execution_id = ${v}`, withRaw(['agent_execution_id'], v));

// \u0000 and other escapes.
add('\\u0000 in description', withRaw(['normalized', 'subagent_task', 'description'], '"a\\u0000b"'));
add('\\u0000 in tool_call_id', withRaw(['tool_call_id'], '"toolu_\\u0000"'));
add('\\u0000 as a key', REAL_TEXT.replace('{"tool_call_id"', '{"\\u0000":1,"tool_call_id"'));
add('\\u0000 where nothing reads it', withRaw(['title'], '"\\u0000"'));
add('an escaped backslash before u0000', withRaw(['normalized', 'subagent_task', 'description'], '"\\\\u0000"'));
add('escapes of every kind', withRaw(['normalized', 'subagent_task', 'description'], '"\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9"'));
add('control characters by escape', withRaw(['normalized', 'subagent_task', 'description'], '"\\u0001\\u001f\\u007f"'.replace('\\u0001', '\\u0002')));

// Unicode.
add('unicode text fields', withRaw(['normalized', 'subagent_task', 'description'], JSON.stringify('日本語 🚀 مرحبا Ωμέγα \u2028\u2029 e\u0301')));
add('unicode tool_call_id (NFC)', withRaw(['tool_call_id'], JSON.stringify('toolu_\u00e9')));
add('unicode tool_call_id (NFD)', withRaw(['tool_call_id'], JSON.stringify('toolu_e\u0301')));
add('right-to-left override in tool_call_id', withRaw(['tool_call_id'], JSON.stringify('toolu_\u202eevil')));
add('surrogate pair by escape', withRaw(['normalized', 'subagent_task', 'model'], '"\\ud83d\\ude80"'));
add('lone high surrogate by escape', withRaw(['normalized', 'subagent_task', 'model'], '"\\ud800"'));
add('lone low surrogate by escape', withRaw(['normalized', 'subagent_task', 'model'], '"\\udc00x"'));
add('unicode keys beside the call', REAL_TEXT.replace('{"tool_call_id"', '{"ключ":"значение","🔑":[],"tool_call_id"'));
add('4-byte characters in every short field', JSON.stringify({ ...REAL, tool_call_id: '𝔱𝔬𝔬𝔩', status: '𝔭𝔢𝔫𝔡𝔦𝔫𝔤',
  normalized: { kind: 'subagent_task', subagent_task: { subagent_type: '🧪', description: '🔍', agent_id: '𝟏', model: '🤖' } } }));

// Identity from the message row itself.
add('message task_id is empty', REAL_TEXT, '');
add('message task_id is NULL', REAL_TEXT, null);

// Each document as the model reads it (parseMetadata refuses a document holding its number mark).
const parsedCorpus: Metadata[] = corpus.map((c) => parseMetadata(c.metadata));

// ---------------------------------------------------------------------------------------------------

const T0 = '2026-08-12 09:00:00', T1 = '2026-08-12 09:00:01', T2 = '2026-08-12 09:00:02';
const md5 = (s: string) => createHash('md5').update(s, 'utf8').digest('hex');
type Stats = Record<string, bigint>;
const statsOf = async (schema: string): Promise<Stats> => (await db.query(`SELECT * FROM "${schema}".subagent_context_stats()`)).rows[0];

/** One task/session/turn per case, so no two cases share a key. */
async function createSessions(schema: string) {
  await db.query(`INSERT INTO "${schema}".tasks (id, title, created_at, updated_at) SELECT 'task-' || i, 't', $2, $2 FROM generate_series(0, $1 - 1) AS i`, [corpus.length, T0]);
  await db.query(`INSERT INTO "${schema}".task_sessions (id, task_id, started_at, updated_at) SELECT 'hs-' || i, 'task-' || i, $2, $2 FROM generate_series(0, $1 - 1) AS i`, [corpus.length, T0]);
  await db.query(`INSERT INTO "${schema}".task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) SELECT 'turn-' || i, 'hs-' || i, 'task-' || i, $2, $2, $2
                    FROM generate_series(0, $1 - 1) AS i`, [corpus.length, T0]);
}
const messageOf = (i: number) => ({
  session: `hs-${i}`, task: corpus[i].task === undefined ? `task-${i}` : corpus[i].task!, turn: `turn-${i}` });

async function insert(c: pg.Client, schema: string, i: number, metadata: string | null) {
  const m = messageOf(i);
  await c.query(`INSERT INTO "${schema}".task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, '', 'tool_call', $5, $6, $7)`, [`msg-${i}`, m.session, m.task, m.turn, metadata, T0, T1]);
}
const update = (c: pg.Client, schema: string, i: number, metadata: string | null) =>
  c.query(`UPDATE "${schema}".task_session_messages SET metadata = $2, updated_at = $3 WHERE id = $1`, [`msg-${i}`, metadata, T2]);
async function storedMatches(c: pg.Client, schema: string, i: number, metadata: string | null) {
  const { rows } = await c.query(
    `SELECT metadata IS NULL AS is_null, md5(metadata) AS md5, octet_length(metadata) AS bytes
       FROM "${schema}".task_session_messages WHERE id = $1`, [`msg-${i}`]);
  expect(rows, corpus[i].label).toEqual([metadata === null ? { is_null: true, md5: null, bytes: null }
    : { is_null: false, md5: md5(metadata), bytes: Buffer.byteLength(metadata, 'utf8') }]);
}

/** Case i's message: INSERTed at T1, then its UPDATE at T2 (insert() and update() below). */
function writes(i: number) {
  const m = messageOf(i);
  const message = { id: `msg-${i}`, task_session_id: m.session, task_id: m.task, turn_id: m.turn,
    metadata: parsedCorpus[i], created_at: microsOf(T0), updated_at: microsOf(T1) };
  return [
    { op: 'insert' as const, message, executionSetting: null },
    { op: 'update' as const, id: message.id, set: { metadata: parsedCorpus[i], updated_at: microsOf(T2) }, executionSetting: null },
  ];
}

/** What the corpus should do to the stats and rows of a schema (writes that reach the trigger only). */
function expectations(reaches: (i: number) => boolean) {
  const model = new CaptureModel();
  corpus.forEach((_, i) => { if (reaches(i)) for (const w of writes(i)) model.apply(w); });
  const rows = new Map([...model.rows.values()].map((r) => [r.task_session_id, r]));
  return { stats: model.stats, rows, failures: model.failures };
}

/** What the first write of case i does, on its own. */
const firstOutcome = (i: number): Outcome => new CaptureModel().apply(writes(i)[0]);

async function derivedRows(schema: string) {
  const { rows } = await db.query(`SELECT * FROM "${schema}".task_session_subagents`);
  return new Map(rows.map(({ id, ...r }) => [r.task_session_id as string, r]));
}

// What the host's expression index on (metadata::jsonb ->> 'tool_call_id') does to a write, if anything.
function hostIndexRefusal(i: number): string | null {
  const doc = parsedCorpus[i];
  const refusal = jsonbRefusal(doc);
  if (refusal !== null || !('json' in doc)) return refusal;
  const id = member(doc.json, 'tool_call_id');
  return id?.t === 'str' && id.v.length > MB / 2 ? '54000' : null;   // the index entry cannot hold it
}

describe('a hostile metadata corpus', () => {
  it(`has ${corpus.length} documents, of every kind the docs name`, () => {
    const outcomes = corpus.map((_, i) => firstOutcome(i));
    const counted = (k: string) => outcomes.filter((o) => o === k).length;
    expect(corpus.length).toBeGreaterThanOrEqual(300);
    // Enough of each outcome that the comparison below means something.
    expect(counted('persisted')).toBeGreaterThan(150);
    expect(counted('none')).toBeGreaterThan(300);
    expect(counted('skipped')).toBeGreaterThan(10);
    expect(counted('failed')).toBe(2);
    // An escaped kind qualifies here because the document still spells subagent_task literally (its
    // subagent_task key); a document that never spells it does not (test/host/prefilter.test.ts). The
    // upper-case kind does not.
    const byLabel = (l: string) => firstOutcome(corpus.findIndex((c) => c.label === l));
    expect(byLabel('kind = "subagent\\u005ftask"')).toBe('persisted');
    expect(byLabel('"kind" spelled with an escape')).toBe('persisted');
    expect(byLabel('kind = "SUBAGENT_TASK"')).toBe('none');
    expect(byLabel('\\u0000 in description')).toBe('none');
  });

  it('without the host index: every write commits, byte-identical, rows and stats as the docs say', { timeout: 300_000 }, async () => {
    await createSessions('public');
    const c = await db.connect();
    await c.query(`SET synchronous_commit = off`);   // every write still commits; no wait for the flush
    const warnings: string[] = [];
    c.on('notice', (n) => { if (n.severity === 'WARNING') warnings.push(n.message ?? ''); });
    const before = await statsOf('public');
    for (let i = 0; i < corpus.length; i++) {
      await insert(c, 'public', i, corpus[i].metadata);
      await storedMatches(c, 'public', i, corpus[i].metadata);
      await update(c, 'public', i, corpus[i].metadata);
      await storedMatches(c, 'public', i, corpus[i].metadata);
    }
    const expected = expectations(() => true);
    const after = await statsOf('public');
    expect(Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]))).toEqual(expected.stats);
    expect(expected.stats.attempted).toBe(expected.stats.skipped_no_identity + expected.stats.persisted + expected.stats.failed);

    const got = await derivedRows('public');
    expect([...got.keys()].sort()).toEqual([...expected.rows.keys()].sort());
    corpus.forEach((c, i) => expect(got.get(`hs-${i}`) ?? null, c.label).toEqual(expected.rows.get(`hs-${i}`) ?? null));

    // The only failures: a tool_call_id too long for the unique key. Logged in full, warned about briefly.
    const { rows: failures } = await db.query(
      `SELECT message_id, sqlstate, octet_length(tool_call_id) AS tool_call_bytes FROM subagent_context_failures ORDER BY id`);
    expect(failures).toEqual(expected.failures);
    expect(warnings).toHaveLength(Number(expected.stats.failed));  // one warning per failed write, one log row per message
    for (const w of warnings) expect(w.length).toBeLessThan(1000);
    const huge = JSON.parse(corpus.find((c) => c.label === '1 MB in tool_call_id')!.metadata!).tool_call_id as string;
    expect(warnings.filter((w) => w.includes(`tool call ${huge.slice(0, 200)} (SQLSTATE 54000)`))).toHaveLength(2);
  });

  it.each([['hostidx', 'the minimal host with kandev\'s metadata index'], ['kandev091', 'the kandev 0.91 host']])('%s (%s): invalid JSON fails in the host index before the trigger; the rest behaves identically', { timeout: 300_000 }, async (schema) => {
    await createSessions(schema);
    const c = await db.connect();
    await c.query(`SET synchronous_commit = off`);
    c.on('notice', () => {});
    const before = await statsOf(schema);
    const refused: string[] = [];
    for (let i = 0; i < corpus.length; i++) {
      const metadata = corpus[i].metadata;
      const refusal = hostIndexRefusal(i);
      if (refusal === null) {
        await insert(c, schema, i, metadata);
        await storedMatches(c, schema, i, metadata);
        await update(c, schema, i, metadata);
        await storedMatches(c, schema, i, metadata);
        continue;
      }
      refused.push(corpus[i].label);
      const err = await insert(c, schema, i, metadata).then(() => null, (e) => e);
      expect(err?.code, corpus[i].label).toBe(refusal);
      // The same document as a later frame of an existing message: refused too; the message keeps its
      // previous metadata.
      await insert(c, schema, i, '{}');
      const err2 = await update(c, schema, i, metadata).then(() => null, (e) => e);
      expect(err2?.code, corpus[i].label).toBe(refusal);
      await storedMatches(c, schema, i, '{}');
    }
    expect(refused.length).toBeGreaterThan(300);
    expect(refused).toContain('1 MB in tool_call_id');
    expect(refused).toContain('literal ""');

    const expected = expectations((i) => hostIndexRefusal(i) === null);
    const after = await statsOf(schema);
    expect(Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]))).toEqual(expected.stats);
    const got = await derivedRows(schema);
    expect([...got.keys()].sort()).toEqual([...expected.rows.keys()].sort());
    corpus.forEach((c, i) => expect(got.get(`hs-${i}`) ?? null, c.label).toEqual(expected.rows.get(`hs-${i}`) ?? null));
    expect((await db.query(`SELECT message_id, sqlstate, octet_length(tool_call_id) AS tool_call_bytes
                              FROM ${schema}.subagent_context_failures ORDER BY id`)).rows)
      .toEqual(expected.failures);

    // Identical to the schema without the index, for every document both accepted.
    const plain = await derivedRows('public');
    for (const [session, row] of got) expect(row).toEqual(plain.get(session));
  });
});
