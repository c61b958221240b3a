// Probe: what an agent writes cannot fail kandev nor make repair's work unbounded (docs/reliability.md,
// #failure-log and #large-documents). Two field cases, on plain tables:
//  - poison: CALLS calls of FRAMES frames each whose agent_execution_id is 3.2 kB of incompressible text
//    (kandev's indexes take it; our unique key cannot: 54000). Reported: the failure log's rows and size
//    after every frame failed, then the first `repair` (it classifies them) and a second one, timed.
//  - a 100 MB frame written under kandev's own statement_timeout = 4s, beside the same write into a
//    database without capture: committed or not, and how long; then `repair` storing its row, timed.
//
// `npm run build && DATABASE_URL=postgres://… node dist/bench/probes/agent-written-limits.js`
// (CALLS, default 20000; FRAMES, default 10; FRAME_MB, default 100). Creates and drops databases
// scprobe_limits_*.
import pg from 'pg';
import { createHostTables, createTurn, subagentMetadata } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { runCli } from '../reconcile.js';

const CALLS = Number(process.env.CALLS ?? 20_000);
const FRAMES = Number(process.env.FRAMES ?? 10);
const FRAME_MB = Number(process.env.FRAME_MB ?? 100);
const admin = process.env.DATABASE_URL!;
const urlOf = (name: string) => { const u = new URL(admin); u.pathname = `/${name}`; return u.toString(); };
const seconds = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e9;

async function fresh(name: string, capture: boolean): Promise<pg.Client> {
  const a = new pg.Client({ connectionString: admin });
  await a.connect();
  await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await a.query(`CREATE DATABASE ${name}`);
  await a.end();
  const c = new pg.Client({ connectionString: urlOf(name) });
  await c.connect();
  c.on('notice', () => {});
  await createHostTables(c, 'public');
  if (capture) await up(c, 'public');
  return c;
}

async function poison(): Promise<void> {
  const name = 'scprobe_limits_poison';
  const c = await fresh(name, true);
  const t = await createTurn(c, 'public', 'poison', '2099-01-01 00:00:00');
  // 100 md5 digests chained: 3,200 hex characters that pglz cannot shrink below the index's limit.
  const frame = (status: string, tokens: string) => `
    '{"tool_call_id":"toolu_p' || g || '","agent_execution_id":"' ||
      (SELECT string_agg(md5(g::text || ':' || i), '') FROM generate_series(1, 100) AS i) ||
      '","normalized":{"kind":"subagent_task","subagent_task":{"status":"${status}","total_tokens":' || ${tokens} || '}}}'`;
  let t0 = process.hrtime.bigint();
  await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
    SELECT 'p' || g, $1, $2, $3, 'agent', '', 'tool_call', ${frame('running', '0')},
           timestamp '2099-01-01' + g * interval '1 millisecond', timestamp '2099-01-01'
      FROM generate_series(1, ${CALLS}) AS g`, [t.session, t.task, t.turn]);
  for (let f = 1; f < FRAMES; f++) {
    await c.query(`UPDATE task_session_messages AS m SET metadata = ${frame('running', String(f))}, updated_at = timestamp '2099-01-01' + ${f} * interval '1 second'
                     FROM (SELECT substring(id FROM 2)::int AS g, id FROM task_session_messages WHERE id LIKE 'p%') AS x WHERE m.id = x.id`);
  }
  const wrote = seconds(t0);
  const size = async () => (await c.query(`SELECT count(*)::int AS rows, coalesce(sum(occurrences), 0)::int AS occurrences,
      pg_size_pretty(pg_total_relation_size('subagent_context_failures')) AS size FROM subagent_context_failures`)).rows[0];
  const before = await size();
  t0 = process.hrtime.bigint();
  const first = await runCli(urlOf(name), ['repair', '--json']);
  const firstS = seconds(t0);
  t0 = process.hrtime.bigint();
  const second = await runCli(urlOf(name), ['repair', '--json']);
  const secondS = seconds(t0);
  console.log(`poison: ${CALLS} calls × ${FRAMES} frames written in ${wrote.toFixed(1)} s; failure log ${JSON.stringify(before)}`);
  console.log(`  first repair: ${firstS.toFixed(1)} s, exit ${first.code}: ${first.stdout.trim()}`);
  console.log(`  second repair: ${secondS.toFixed(1)} s, exit ${second.code}: ${second.stdout.trim()}`);
  console.log(`  failure log after: ${JSON.stringify(await size())}`);
  await c.end();
}

async function largeFrame(): Promise<void> {
  const description = 'x'.repeat(FRAME_MB * 1_000_000);
  for (const capture of [false, true]) {
    const name = `scprobe_limits_large_${capture ? 'capture' : 'plain'}`;
    const c = await fresh(name, capture);
    const t = await createTurn(c, 'public', 'large', '2099-01-01 00:00:00');
    const metadata = subagentMetadata({ tool_call_id: 'toolu_large', status: 'running', subagent: { description } });
    await c.query(`SET statement_timeout = '4s'`);  // kandev's own
    const t0 = process.hrtime.bigint();
    let outcome = 'committed';
    try {
      await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
                     VALUES ('large', $1, $2, $3, 'agent', '', 'tool_call', $4, '2099-01-01 00:00:01', '2099-01-01 00:00:01')`,
        [t.session, t.task, t.turn, metadata]);
    } catch (err) {
      outcome = `failed: ${(err as Error).message}`;
    }
    const wrote = seconds(t0);
    await c.query('RESET statement_timeout');
    let after = '';
    if (capture) {
      const deferred = (await c.query(`SELECT count(*)::int AS n FROM subagent_context_failures WHERE sqlstate = '54000'`)).rows[0].n;
      const r0 = process.hrtime.bigint();
      const r = await runCli(urlOf(name), ['repair', '--json']);
      const h0 = process.hrtime.bigint();
      const h = await runCli(urlOf(name), ['health', '--json']);
      after = `; ${deferred} deferred capture recorded; repair ${seconds(r0).toFixed(2)} s (exit ${r.code}, ${r.stdout.trim()}); ` +
        `then health --json ${seconds(h0).toFixed(2)} s: ${h.stdout.trim()}; rows ${(await c.query('SELECT count(*)::int AS n FROM task_session_subagents')).rows[0].n}`;
    }
    console.log(`a ${FRAME_MB} MB frame under statement_timeout = 4s, ${capture ? 'with capture' : 'without capture'}: ${outcome} in ${wrote.toFixed(2)} s${after}`);
    await c.end();
  }
}

async function main(): Promise<void> {
  if (process.env.ONLY !== 'large') await poison();
  if (process.env.ONLY !== 'poison') await largeFrame();
  const a = new pg.Client({ connectionString: admin });
  await a.connect();
  for (const n of ['scprobe_limits_poison', 'scprobe_limits_large_plain', 'scprobe_limits_large_capture']) {
    await a.query(`DROP DATABASE IF EXISTS ${n} WITH (FORCE)`);
  }
  await a.end();
}

main().catch((err) => { console.error(err); process.exit(1); });
