// Probe: the worst latency kandev's writers see while an operator runs `up`, the backfill, `repair` and
// `uninstall` on a live store, before (v0.2.0, commit ba62a39, its own migrations and SQL taken from git)
// and after (this checkout). A store of SIZE messages (default 1M, bench/stores.ts seedStore), 8 writers
// (INSERT of new messages, UPDATE of historical subagent messages, each with statement_timeout = '3s')
// and, during `up` and `uninstall`, one session idle in a transaction (a writer for `up`, a reader for
// `uninstall`) that ends after IDLE_S seconds (default 15). Prints one line per phase and variant: the
// worst write, how many writes failed, and how the command ended.
// `npm run build && node dist/bench/probes/live-writers.js` (DATABASE_URL: a server to create databases
// on, default the local one; SIZE; IDLE_S). Heavy: seeds two stores of SIZE messages.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createHostTables } from '../../kandev/host.js';
import { backfill, migrate, up } from '../../src/install.js';
import { MIGRATIONS_TABLE, PACKAGE_ROOT } from '../../src/paths.js';
import { quoteIdent } from '#sql';
import { benchPlan, seedStore, templates, BENCH_HOST } from '../stores.js';

const ADMIN = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SIZE = Number(process.env.SIZE ?? 1_000_000);
const IDLE_S = Number(process.env.IDLE_S ?? 15);
const WRITERS = 8;
const OLD = 'ba62a39';

const urlOf = (db: string) => { const u = new URL(ADMIN); u.pathname = `/${db}`; return u.toString(); };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function client(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, application_name: 'live-writers-probe' });
  c.on('error', () => {});
  await c.connect();
  return c;
}

/** v0.2.0's migrations, as that release's `up` (and its plain node-pg-migrate) ran them, in either direction. */
async function oldMigrations(url: string, direction: 'up' | 'down') {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-context-0.2.0-'));
  try {
    execFileSync('tar', ['-x', '-C', dir], { input: execFileSync('git', ['-C', PACKAGE_ROOT, 'archive', OLD, 'migrations', 'sql', 'package.json']) });
    const { runner } = await import('node-pg-migrate');
    const c = await client(url);
    try {
      await runner({ dbClient: c, dir: join(dir, 'migrations'), direction, count: direction === 'down' ? Infinity : undefined,
        schema: 'public', migrationsTable: MIGRATIONS_TABLE, checkOrder: true, logger: { debug() {}, info() {}, warn() {}, error() {} } });
    } finally {
      await c.end();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Eight writers until stopped: new messages, and new frames of historical subagent messages. */
async function startWriters(url: string, historical: string[]) {
  const clients = await Promise.all([...Array(WRITERS)].map(() => client(url)));
  let stop = false;
  let worst = 0;
  let failed = 0;
  let writes = 0;
  const loops = clients.map(async (c, w) => {
    await c.query(`SET statement_timeout = '3s'`);
    for (let n = 0; !stop; n++) {
      const t0 = performance.now();
      try {
        if (n % 2 === 0 && historical.length > 0) {
          await c.query(`UPDATE task_session_messages SET updated_at = updated_at + interval '1 microsecond' WHERE id = $1`,
            [historical[(w * 7919 + n) % historical.length]]);
        } else {
          await c.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
            SELECT 'probe-' || $1::text, task_session_id, task_id, turn_id, 'agent', '', 'message', '{"kind":"message"}', now(), now()
              FROM task_session_messages WHERE id = $2`, [`${w}-${n}-${Date.now()}`, historical[0] ?? '']);
        }
        writes++;
      } catch {
        failed++;
      }
      worst = Math.max(worst, performance.now() - t0);
      await sleep(25);
    }
  });
  return {
    /** The worst latency and failures since the last call. */
    window() { const r = { worst, failed, writes }; worst = 0; failed = 0; writes = 0; return r; },
    async stop() { stop = true; await Promise.all(loops); await Promise.all(clients.map((c) => c.end())); },
  };
}

/** A session idle in a transaction for IDLE_S seconds: having written a message, or only read. */
async function idleSession(url: string, kind: 'writer' | 'reader', someMessage: string) {
  const c = await client(url);
  await c.query('BEGIN');
  if (kind === 'writer') await c.query(`UPDATE task_session_messages SET updated_at = updated_at WHERE id = $1`, [someMessage]);
  else await c.query(`SELECT count(*) FROM task_session_messages WHERE id = $1`, [someMessage]);
  const done = sleep(IDLE_S * 1000).then(() => c.query('COMMIT')).then(() => c.end());
  return done;
}

async function phase(name: string, variant: string, w: Awaited<ReturnType<typeof startWriters>>, run: () => Promise<unknown>) {
  w.window();
  const t0 = performance.now();
  let outcome = 'ok';
  try { await run(); } catch (err) { outcome = `stopped: ${String((err as Error).message).slice(0, 160)}`; }
  const took = (performance.now() - t0) / 1000;
  const seen = w.window();
  console.log(`${variant.padEnd(7)} ${name.padEnd(9)} worst write ${(seen.worst / 1000).toFixed(2)} s, ${seen.failed} of ${seen.writes + seen.failed} writes failed; took ${took.toFixed(1)} s; ${outcome}`);
}

async function main() {
  const tmpl = templates(benchPlan());
  for (const variant of ['v0.2.0', 'current'] as const) {
    const db = `probe_live_writers_${variant.replace(/\W/g, '')}`;
    const admin = await client(ADMIN);
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(db)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${quoteIdent(db)}`);
    await admin.end();
    const url = urlOf(db);
    const c = await client(url);
    await createHostTables(c, 'public', { shape: BENCH_HOST });
    await seedStore(c, SIZE, tmpl);
    await c.query('VACUUM ANALYZE');
    const { rows } = await c.query(`SELECT id FROM task_session_messages WHERE strpos(metadata, 'subagent_task') > 0 ORDER BY random() LIMIT 2001`);
    // The idle session's message is none of the writers': a writer that updated it would wait for that
    // session's row lock, with or without this project.
    const [idleMessage, ...historical] = rows.map((r) => r.id as string);
    const w = await startWriters(url, historical);

    // up, with a writer idle in its transaction; the current release stops and is run again once it ended.
    await phase('up', variant, w, async () => {
      const idle = idleSession(url, 'writer', idleMessage);
      try {
        if (variant === 'v0.2.0') await oldMigrations(url, 'up');
        else await up(c, 'public');
      } finally {
        await idle;
      }
    });
    if (variant === 'current') {
      await phase('up again', variant, w, () => up(c, 'public'));
    }
    // The backfill alone: keys and rows removed, then the backfill as each release's `backfill` runs it.
    await c.query(`DELETE FROM kandev_meta WHERE key LIKE 'subagent_context_%'`);
    await c.query(`DELETE FROM task_session_subagents`);
    await phase('backfill', variant, w, () => variant === 'v0.2.0'
      ? c.query(`SELECT * FROM subagent_context_backfill()`)
      : backfill(c, 'public'));
    // repair: rows of messages since activation removed (a trigger that was disabled for a while). The current
    // release first completes a reconciliation, as `health --full` would (capture_since moved, so none of
    // this activation exists yet), then repairs in batches; both are in the phase.
    await c.query(`UPDATE kandev_meta SET value = '2026-01-01T00:00:00.000000000Z' WHERE key = 'subagent_context_capture_since'`);
    await c.query(`DELETE FROM task_session_subagents`);
    await phase('repair', variant, w, async () => {
      if (variant === 'v0.2.0') {
        await c.query(`SELECT * FROM subagent_context_repair()`);
        return;
      }
      await c.query('CALL subagent_context_reconcile_all()');
      for (;;) {
        const { rows: [b] } = await c.query(`SELECT repaired::float8 AS repaired, remaining::float8 AS remaining FROM subagent_context_repair()`);
        if (b.repaired === 0 || b.remaining === 0) break;
      }
    });
    // uninstall, with a reader idle in its transaction.
    await phase('uninstall', variant, w, async () => {
      const idle = idleSession(url, 'reader', idleMessage);
      try {
        if (variant === 'v0.2.0') await oldMigrations(url, 'down');
        else await migrate(c, 'public', 'down');
      } finally {
        await idle;
      }
    });
    await w.stop();
    await c.end();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
