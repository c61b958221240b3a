// Probe: where a subagent frame's CPU goes inside the server, part by part, in backend instructions
// (callgrind on a single-user backend: bench/callgrind.ts), so the answer does not depend on the load.
//
// A scratch cluster (embedded PostgreSQL 17) holds kandev 0.91's host shape with capture installed (`up`)
// and, in a schema `probe`, the subagent frames of the traffic model's live sessions (their metadata as
// kandev writes it, in order: a launch frame inserts a row, later frames merge into it) and the row each
// one derives. Every part is a plpgsql function that does one thing for frame i; the single-user backend
// runs `SELECT probe.<part>(i)` once per frame, each its own statement and transaction, as a message
// write is. A part's cost per frame is its count minus the count of `probe.base(i)` (the same function
// reading the same frame and doing nothing else). Index costs come from phases: the same frames upserted
// with every index, then with one index dropped at a time. Health's partial index on kandev's table is
// kandev's own UPDATE of the frames with the trigger disabled, with the index and without it.
//
// `npm run build && node dist/bench/probes/frame-cost.js` (FRAMES=n, default 120; RESULT_TEXT=1 makes each
// completed frame carry the 50 KB result_text)
import { readlinkSync } from 'node:fs';
import { startEmbeddedPostgres } from '../../demo/embedded.js';
import { createHostTables } from '../../kandev/host.js';
import { type Write } from '../../kandev/traffic-plan.js';
import { kandevStatements } from '../../kandev/traffic-write.js';
import { up } from '../../src/install.js';
import { open } from '../harness.js';
import { benchPlan, completedCalls, BENCH_HOST } from '../stores.js';
import { countInstructions, lit, postgresOwner } from '../callgrind.js';

const FRAMES = Number(process.env.FRAMES ?? 120);

interface Frame { session: string; task: string; turn: string; message: string; op: 'insert' | 'update'; metadata: string }

function frames(): Frame[] {
  const out: Frame[] = [];
  const sessions = process.env.RESULT_TEXT === '1' ? [completedCalls()] : benchPlan().sessions.filter((s) => !s.history && !s.abandoned);
  for (const s of sessions) {
    for (const t of s.turns) {
      for (const w of t.writes as Write[]) {
        if (w.class !== 'subagent' || (w.op !== 'insert' && w.op !== 'update') || !w.metadata || w.noIdentity) continue;
        out.push({ session: s.session, task: s.task, turn: t.id, message: w.message, op: w.op, metadata: w.metadata });
        if (out.length >= FRAMES) return out;
      }
    }
  }
  return out;
}

// The parts. Each reads frame i as base() does, then does its one thing.
const READ = `SELECT f.* INTO r FROM probe.frames AS f WHERE f.i = $1;`;
const DERIVE_ARGS = `r.session, r.task, r.turn, doc, r.created_at, r.updated_at, 'unknown'`;
// The upsert of capture's subagent_context_merge_message() (sql/code/capture.sql), its derived row read from probe.derived
// under a tag that keeps each part's keys apart. The merge (ON CONFLICT ... DO UPDATE SET ...) is taken from
// the installed function, so the probe measures the rules capture runs, not a copy of them.
const UPSERT = (merge: string, table: string, tag: string) => `INSERT INTO ${table} AS s (id, source,
      task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, parent_tool_call_id,
      subagent_type, description, agent_id, child_session_id, model, agent_status, tool_status,
      is_async, total_tokens, tool_use_count, duration_ms, observed_at, settled_at, updated_at)
    SELECT 'id-' || ${tag} || '-' || $1, 'live', (d.row).task_session_id, (d.row).task_id, (d.row).turn_id, (d.row).tool_call_id || ${tag},
      (d.row).agent_execution_id, (d.row).parent_tool_call_id, (d.row).subagent_type, (d.row).description, (d.row).agent_id,
      (d.row).child_session_id, (d.row).model, (d.row).agent_status, (d.row).tool_status, (d.row).is_async, (d.row).total_tokens,
      (d.row).tool_use_count, (d.row).duration_ms, (d.row).observed_at, (d.row).settled_at, (d.row).updated_at
      FROM probe.derived AS d WHERE d.i = $1
    ${merge};`;

/** The ON CONFLICT clause of the installed subagent_context_merge_message(), up to the end of its statement. */
async function installedMerge(c: { query: (sql: string) => Promise<{ rows: Array<{ def: string }> }> }): Promise<string> {
  const { rows: [{ def }] } = await c.query(`SELECT pg_get_functiondef('public.subagent_context_merge_message'::regproc) AS def`);
  const merge = /ON CONFLICT \(task_session_id, agent_execution_id, tool_call_id\) DO UPDATE SET[\s\S]*?;/.exec(def)?.[0];
  if (!merge) throw new Error('subagent_context_merge_message() has no ON CONFLICT ... DO UPDATE SET clause that this probe can read');
  return merge.slice(0, -1).replace(/--[^\n]*/g, '');
}

const parts = (merge: string): Record<string, string> => ({
  base: `${READ}`,
  parse: `${READ} doc := r.metadata::jsonb;`,
  // What the trigger computes before its upsert, on an already parsed document (parse is its own part).
  checks: `${READ} doc := r.metadata::jsonb;
    IF public.subagent_context_qualifies(doc) AND public.subagent_context_has_identity(r.session, r.task, doc) THEN
      IF doc #> '{normalized,subagent_task}' ?| ARRAY['total_tokens', 'tool_use_count', 'duration_ms'] THEN
        b := public.subagent_context_has_anomaly(doc);
      END IF;
      t := public.subagent_context_execution_id(doc, current_setting('subagent_context.agent_execution_id', true));
      ts := clock_timestamp() AT TIME ZONE 'UTC';
    END IF;`,
  // A query (not a simple expression) with a FROM: what any SELECT ... INTO costs plpgsql, whatever it computes.
  query: `${READ} doc := r.metadata::jsonb; SELECT x.v INTO t FROM (VALUES (r.session)) AS x(v);`,
  derive: `${READ} doc := r.metadata::jsonb;
    SELECT d.* INTO dr FROM public.subagent_context_derive_row(${DERIVE_ARGS}) AS d;`,
  // A variant (not what capture does): the same fields read by two jsonb_to_record calls instead of one
  // operator expression per field; what a derivation with few expression nodes would cost. Types are
  // looser (a number read as text), so it is a cost estimate, not a replacement as it stands.
  derive_record: `${READ} doc := r.metadata::jsonb;
    SELECT r.session, r.task, r.turn, y.tool_call_id, 'unknown', y.parent_tool_call_id, x.subagent_type, x.description,
           x.agent_id, x.child_session_id, x.model, x.status, y.status, (x.is_async = 'true')::int,
           CASE WHEN x.total_tokens ~ '^[0-9]{1,18}$' THEN x.total_tokens::bigint END,
           CASE WHEN x.tool_use_count ~ '^[0-9]{1,18}$' THEN x.tool_use_count::bigint END,
           CASE WHEN x.duration_ms ~ '^[0-9]{1,18}$' THEN x.duration_ms::bigint END, r.created_at, NULL, r.updated_at
      INTO dr
      FROM jsonb_to_record(doc) AS y(tool_call_id text, parent_tool_call_id text, status text, normalized jsonb),
           jsonb_to_record(y.normalized -> 'subagent_task') AS x(subagent_type text, description text, agent_id text,
             child_session_id text, model text, status text, is_async text, total_tokens text, tool_use_count text, duration_ms text);`,
  uuid: `${READ} t := gen_random_uuid()::text;`,
  subxact_empty: `${READ} BEGIN doc := r.metadata::jsonb; EXCEPTION WHEN OTHERS THEN NULL; END;`,
  counters: `${READ} n := nextval('public.subagent_context_attempted_seq') + nextval('public.subagent_context_persisted_seq')
    + nextval('public.subagent_context_unknown_execution_seq');`,
  counter_one: `${READ} n := nextval('public.subagent_context_attempted_seq');`,
  upsert: `${READ} ${UPSERT(merge, 'public.task_session_subagents', "'u'")}`,
  upsert_in_subxact: `${READ} BEGIN ${UPSERT(merge, 'public.task_session_subagents', "'x'")} EXCEPTION WHEN OTHERS THEN NULL; END;`,
});
// Upsert phases: the same upsert into the table, with indexes dropped one at a time in this order.
const INDEXES = ['task_session_subagents_known_execution_idx', 'task_session_subagents_observed_idx',
  'task_session_subagents_turn_idx', 'task_session_subagents_task_idx'];

function fn(name: string, body: string): string {
  return `CREATE FUNCTION probe.${name}(integer) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r record; doc jsonb; dr public.subagent_context_row; t text; b boolean; ts timestamp; n bigint;
BEGIN ${body} END $f$`;
}

async function main() {
  const list = frames();
  const server = await startEmbeddedPostgres({ flags: ['-c', 'max_wal_size=4GB'] });
  const postgres = readlinkSync(`/proc/${server.pid}/exe`);
  try {
    const admin = await open(server.url, 'off');
    await admin.query('CREATE DATABASE probe');
    await admin.end();
    const c = await open(server.url.replace(/\/postgres$/, '/probe'), 'off');
    await createHostTables(c, 'public', { shape: BENCH_HOST });
    const res = await up(c, 'public');
    if (res.backfill.status !== 'activated') throw new Error(`backfill ${res.backfill.status}`);
    await c.query(`CREATE SCHEMA probe; CREATE TABLE probe.frames (i int PRIMARY KEY, session text, task text, turn text,
      message text, op text, metadata text, created_at timestamp, updated_at timestamp)`);
    await c.query(`INSERT INTO probe.frames SELECT i - 1, s, t, u, m, o, d, '2026-12-01'::timestamp + i * interval '1 s',
        '2026-12-01'::timestamp + i * interval '1 s'
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS x(s, t, u, m, o, d, i)`,
    [list.map((f) => f.session), list.map((f) => f.task), list.map((f) => f.turn), list.map((f) => f.message), list.map((f) => f.op), list.map((f) => f.metadata)]);
    await c.query(`CREATE TABLE probe.derived AS SELECT f.i, d AS row FROM probe.frames AS f,
      LATERAL public.subagent_context_derive_row(f.session, f.task, f.turn, f.metadata::jsonb, f.created_at, f.updated_at, 'unknown') AS d`);
    await c.query(`CREATE UNIQUE INDEX ON probe.derived (i)`);
    const merge = await installedMerge(c);
    const PARTS = parts(merge);
    for (const [name, body] of Object.entries(PARTS)) await c.query(fn(name, body));
    // Health's index on kandev's table: kandev's own UPDATE of the frames' messages, the trigger disabled.
    for (const s of new Set(list.map((f) => `${f.session}\t${f.task}`))) {
      const [session, task] = s.split('\t');
      await c.query(`INSERT INTO tasks (id, title, created_at, updated_at) VALUES ($1, 'c', now(), now()) ON CONFLICT DO NOTHING`, [task]);
      await c.query(`INSERT INTO task_sessions (id, task_id, started_at, updated_at) VALUES ($1, $2, now(), now())`, [session, task]);
    }
    for (const t of new Set(list.map((f) => `${f.turn}\t${f.session}\t${f.task}`))) {
      const [turn, session, task] = t.split('\t');
      await c.query(`INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ($1, $2, $3, now(), now(), now())`, [turn, session, task]);
    }
    await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, author_id, content,
        requests_input, type, metadata, created_at, updated_at)
      SELECT DISTINCT ON (message) message, session, task, turn, 'agent', '', '', 0, 'tool_call', '{}', created_at, updated_at FROM probe.frames ORDER BY message, i`);
    await c.query('VACUUM ANALYZE');
    await c.end();
    await server.kill('SIGINT');

    const st = kandevStatements('public');
    const per = (name: string) => list.map((_, i) => `SELECT probe.${name}(${i})`);
    const update = list.map((f, i) => `EXECUTE "${st.update.name}"(${[f.message, '', 0, 'tool_call', f.metadata, `2026-12-02 00:00:${String(i % 60).padStart(2, '0')}`].map(lit).join(', ')})`);
    // Every UPDATE phase starts from the same rows: the documents back to '{}', dead versions gone.
    const RESET = [`UPDATE public.task_session_messages SET metadata = '{}' WHERE id IN (SELECT message FROM probe.frames)`,
      'VACUUM public.task_session_messages'];
    const phases: Array<{ name: string; setup: string[]; statements: string[] }> = [];
    // Warm-up, not counted: every part six times, since plpgsql plans a statement with parameters afresh
    // (custom plans) for its first five runs in a session and settles on a cached generic plan after that,
    // as a long-lived kandev connection has.
    const WARM = [0, 1, 2, 3, 4, 5];
    phases.push({ name: 'warm-up', setup: [], statements: Object.keys(PARTS).flatMap((p) => WARM.map((i) => `SELECT probe.${p}(${i})`)) });
    for (const p of Object.keys(PARTS)) phases.push({ name: p, setup: [], statements: per(p) });
    // Index phases: the upsert again (fresh keys per phase), one index fewer each time.
    INDEXES.forEach((idx, k) => {
      phases.push({ name: `upsert without ${INDEXES.slice(0, k + 1).map((x) => x.replace('task_session_subagents_', '')).join(', ')}`,
        setup: [`DROP INDEX public.${idx}`, `CREATE OR REPLACE FUNCTION probe.upsert_${k}(integer) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r record; BEGIN ${READ} ${UPSERT(merge, 'public.task_session_subagents', `'p${k}'`)} END $f$`, ...WARM.map((i) => `SELECT probe.upsert_${k}(${i})`)],
        statements: list.map((_, i) => `SELECT probe.upsert_${k}(${i})`) });
    });
    phases.push({ name: 'kandev UPDATE, trigger disabled, health index', setup: [`PREPARE "${st.update.name}" AS ${st.update.text}`,
      'ALTER TABLE public.task_session_messages DISABLE TRIGGER subagent_context_capture', ...update.slice(0, 6), ...RESET], statements: update });
    phases.push({ name: 'kandev UPDATE, trigger disabled, no health index', setup: ['DROP INDEX public.subagent_context_recent_messages_idx', ...update.slice(0, 6), ...RESET], statements: update });
    const statements = phases.flatMap((p) => [...p.setup, ...p.statements]);
    // full_page_writes off: the first change of a page after the start-up checkpoint would otherwise log
    // the whole page, charging whichever part came first.
    const counts = await countInstructions(statements, { postgres, dataDir: server.dataDir, database: 'probe', owner: postgresOwner(),
      settings: { full_page_writes: 'off' } });
    let k = 0;
    const mean: Record<string, number> = {};
    for (const p of phases) {
      k += p.setup.length;
      const xs = counts.slice(k, k + p.statements.length);
      k += p.statements.length;
      mean[p.name] = xs.reduce((a, b) => a + b, 0) / xs.length;
    }
    const base = mean.base;
    const row = (part: string, value: number, note = '') => console.log(`| ${part} | ${Math.round(value).toLocaleString('en-US')} | ${note} |`);
    console.log(`${list.length} subagent frames${process.env.RESULT_TEXT === '1' ? ' (completed calls, 50 KB result_text)' : ''}, ` +
      `metadata ${Math.round(list.reduce((a, f) => a + f.metadata.length, 0) / list.length)} characters on average; instructions per frame\n`);
    console.log('| part | instructions per frame | how |\n|---|---|---|');
    row('statement + function call + reading the frame (base)', base, 'subtracted from every row below');
    row('jsonb parse of the whole document', mean.parse - base, 'parse - base');
    row('checks before the upsert (qualifies, identity, anomaly, execution id, clock)', mean.checks - mean.parse, 'checks - parse');
    row('a plpgsql query with a FROM (SELECT ... INTO), computing nothing', mean.query - mean.parse, 'query - parse');
    row('derivation (subagent_context_derive_row), beyond that query', mean.derive - mean.query, 'derive - query');
    row('  variant: the same fields by two jsonb_to_record calls', mean.derive_record - mean.query, 'derive_record - query');
    row('gen_random_uuid()::text', mean.uuid - base, 'uuid - base');
    row('EXCEPTION block, nothing written', mean.subxact_empty - mean.parse, 'subxact_empty - parse');
    row('EXCEPTION block around the upsert (writes: takes a subxid)', mean.upsert_in_subxact - mean.upsert, 'upsert_in_subxact - upsert');
    row('counters: 3 nextval (attempted, persisted, unknown_execution)', mean.counters - base, 'counters - base');
    row('one nextval', mean.counter_one - base, 'counter_one - base');
    row('the upsert, all indexes (its derived row read from a table by key)', mean.upsert - base, 'upsert - base');
    let prev = mean.upsert;
    INDEXES.forEach((idx, i) => {
      const m = mean[phases.find((p) => p.name.startsWith('upsert without') && p.name.split(', ').length === i + 1)!.name];
      row(`  of which index ${idx}`, prev - m, 'phase before - phase without it');
      prev = m;
    });
    row('  the upsert with only the unique key and the primary key', prev - base, '');
    const withIdx = mean['kandev UPDATE, trigger disabled, health index'];
    const noIdx = mean['kandev UPDATE, trigger disabled, no health index'];
    row("kandev's UPDATE of the frame, trigger disabled", withIdx, '');
    row("  of which health's partial index on task_session_messages", withIdx - noIdx, 'with - without the index');
  } finally {
    await server.stop();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
