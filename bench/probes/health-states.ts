// Probe: health and the scrape in the states an operator meets an incident in (docs/health.md#bounded-in-every-state),
// beside the steady state, on a ~10k-message store: a burst of BURST subagent calls the trigger missed, dated
// after activation (written with session_replication_role = replica), before the comparison caught up;
// then with all of them recorded missing (the background steps caught up: BURST recorded misses); then
// after `repair` stored them. Each state: `SELECT * FROM subagent_context_health()` (SQL, ms), `health
// --json` and `metrics --once` (CLI wall, node's start included, ms), ROUNDS times each; plus the catch-up
// rate of the background comparison (messages/s, the steps `metrics` runs) and `health --full` after the
// repair (it must find 0).
//
// `npm run build && DATABASE_URL=postgres://… node dist/bench/probes/health-states.js` (BURST=n, default
// 150000; ROUNDS, default 3). DATABASE_URL names a server where a database `scprobe_health_states` may be
// created and dropped (plain tables; Citus is not covered by this probe yet).
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { createHostTables, createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const BURST = Number(process.env.BURST ?? 150_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const admin = process.env.DATABASE_URL!;
const NAME = 'scprobe_health_states';
const url = (() => { const u = new URL(admin); u.pathname = `/${NAME}`; return u.toString(); })();
const cliPath = `${PACKAGE_ROOT}/dist/src/cli.js`;

const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function cli(args: string[]): { ms: number; out: string; code: number } {
  const t0 = process.hrtime.bigint();
  try {
    const out = execFileSync(process.execPath, [cliPath, ...args], { env: { ...process.env, DATABASE_URL: url, NO_COLOR: '1' }, encoding: 'utf8' });
    return { ms: ms(t0), out, code: 0 };
  } catch (err) {
    const e = err as { status: number; stdout: string };
    return { ms: ms(t0), out: e.stdout, code: e.status };
  }
}

async function measure(c: pg.Client, label: string): Promise<void> {
  const sql: number[] = [], health: number[] = [], scrape: number[] = [];
  let last: Record<string, unknown> = {};
  let up = '';
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = process.hrtime.bigint();
    last = (await c.query('SELECT shortfall::int, uncompared::int, status FROM public.subagent_context_health()')).rows[0];
    sql.push(ms(t0));
    const h = cli(['health', '--json']);
    health.push(h.ms);
    const m = cli(['metrics', '--once']);
    scrape.push(m.ms);
    up = /^subagent_context_up\{[^}]*\} (\d)/m.exec(m.out)?.[1] ?? '?';
  }
  console.log(`${label}: SQL ${sql.map((x) => x.toFixed(1)).join(' / ')} ms (median ${median(sql).toFixed(1)}); ` +
    `health --json ${health.map((x) => x.toFixed(0)).join(' / ')} ms; metrics --once ${scrape.map((x) => x.toFixed(0)).join(' / ')} ms, up ${up}; ` +
    `answer ${JSON.stringify(last)}`);
}

async function main(): Promise<void> {
  const a = new pg.Client({ connectionString: admin });
  await a.connect();
  await a.query(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
  await a.query(`CREATE DATABASE ${NAME}`);
  await a.end();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  c.on('notice', () => {});
  await createHostTables(c, 'public');
  // A ~10k-message store: one in ten a subagent call, before `up`; 500 sessions for the burst.
  const t = await createTurn(c, 'public', 'store');
  await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
    SELECT 'h' || g, $1, $2, $3, 'agent', '', 'tool_call',
           CASE WHEN g % 10 = 0 THEN '{"normalized":{"kind":"subagent_task"},"tool_call_id":"hist_' || g || '"}'
                ELSE '{"normalized":{"kind":"text"}}' END,
           timestamp '2026-01-01' + g * interval '1 second', timestamp '2026-01-01' + g * interval '1 second'
      FROM generate_series(1, 10000) AS g`, [t.session, t.task, t.turn]);
  await c.query(`INSERT INTO task_sessions (id, task_id, started_at, updated_at)
    SELECT 'burst-' || g, $1, timestamp '2026-01-01', timestamp '2026-01-01' FROM generate_series(0, 499) AS g`, [t.task]);
  execFileSync(process.execPath, [cliPath, 'up'], { env: { ...process.env, DATABASE_URL: url }, stdio: 'ignore' });
  for (let i = 0; i < 20; i++) await insertMessage(c, 'public', { id: `live-${i}`, session: t.session, task: t.task, turn: t.turn,
    created_at: (await c.query(`SELECT (clock_timestamp() AT TIME ZONE 'UTC')::text AS t`)).rows[0].t, metadata: subagentMetadata({ tool_call_id: `live_${i}`, status: 'pending' }) });
  await new Promise((r) => setTimeout(r, 1500));
  cli(['health', '--full']);
  await measure(c, 'steady state');

  // The burst: BURST subagent calls with capture off for this session, dated after activation, one microsecond apart.
  await c.query('BEGIN');
  await c.query('SET LOCAL session_replication_role = replica');
  await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
    SELECT 'b' || g, 'burst-' || (g % 500), $1, $2, 'agent', '', 'tool_call',
           '{"normalized":{"kind":"subagent_task"},"tool_call_id":"burst_' || g || '","status":"pending"}',
           (clock_timestamp() AT TIME ZONE 'UTC') + g * interval '1 microsecond', (clock_timestamp() AT TIME ZONE 'UTC')
      FROM generate_series(1, ${BURST}) AS g`, [t.task, t.turn]);
  await c.query('COMMIT');
  await c.query('ANALYZE task_session_messages');
  await new Promise((r) => setTimeout(r, 1500));
  await measure(c, `burst of ${BURST} missed, not compared yet`);

  // Catch-up: the background steps as the exporter runs them, timed.
  let t0 = process.hrtime.bigint();
  let compared: number;
  for (;;) {
    const { rows: [s] } = await c.query('SELECT status, messages_compared::int AS n FROM public.subagent_context_reconcile()');
    compared = s.n;
    if (s.status !== 'stepped') break;
  }
  const catchUp = ms(t0);
  console.log(`catch-up of the background comparison: ${(BURST / (catchUp / 1000)).toFixed(0)} messages/s (${(catchUp / 1000).toFixed(1)} s; run compared ${compared})`);
  await measure(c, `${BURST} recorded misses`);

  t0 = process.hrtime.bigint();
  const r = cli(['repair', '--json']);
  console.log(`repair: ${(ms(t0) / 1000).toFixed(1)} s: ${r.out.trim()}`);
  await measure(c, 'after repair');
  const full = cli(['health', '--full', '--json']);
  console.log(`health --full after repair: exit ${full.code}, shortfall ${JSON.parse(full.out).shortfall}`);
  await c.end();
}

main().catch((err) => { console.error(err); process.exit(1); });
