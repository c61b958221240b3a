// A private pgbouncer (Debian's package; .ci/run installs it) on a free port in front of one test database, in
// transaction pooling: every client's transactions run on whatever server connection is free, and with
// a pool of one (the default here) all of them on the same one, so whatever a client leaves on a server
// session, the next client sees. The tests that use it skip, saying so, when the binary is absent.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p)) ?? null;
// .ci/run installs it and sets this, so that no CI run skips these tests.
if (!PGBOUNCER && process.env.SUBAGENT_CONTEXT_REQUIRE_PGBOUNCER === '1') {
  throw new Error('SUBAGENT_CONTEXT_REQUIRE_PGBOUNCER=1 but pgbouncer is not installed: apt-get install pgbouncer');
}

export interface Pgbouncer {
  /** The test database through the pooler: postgres://user@127.0.0.1:port/name (it lets any client in). */
  url: string;
  port: number;
  /** Everything pgbouncer logged so far. */
  log(): string;
  stop(): Promise<void>;
}

export interface PgbouncerOptions {
  /** Server connections in the pool (default 1: every client shares the one). */
  poolSize?: number;
  /**
   * Runs DISCARD ALL on the server connection after every transaction (server_reset_query_always): no
   * session state survives a transaction, so whatever a client needs from its previous one is gone.
   */
  resetEveryTransaction?: boolean;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** pgbouncer refuses to run as root; as root it is started as the first of these users that exists. */
function runAs(): string | null {
  if (userInfo().uid !== 0) return null;
  for (const user of ['postgres', 'nobody']) {
    try { execFileSync('id', ['-u', user], { stdio: 'ignore' }); return user; } catch { /* next */ }
  }
  throw new Error('pgbouncer must not run as root and neither user postgres nor nobody exists');
}

/** Starts pgbouncer in transaction pooling in front of the database `databaseUrl` names; resolves once it accepts connections. */
export async function startPgbouncer(databaseUrl: string, opts: PgbouncerOptions = {}): Promise<Pgbouncer> {
  if (!PGBOUNCER) throw new Error('pgbouncer is not installed (apt-get install pgbouncer)');
  const target = new URL(databaseUrl);
  const database = decodeURIComponent(target.pathname.slice(1));
  const user = decodeURIComponent(target.username) || 'postgres';
  const password = decodeURIComponent(target.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'pgbouncer-'));
  chmodSync(dir, 0o755);
  const ini = join(dir, 'pgbouncer.ini');
  // auth_type any: clients log in without a password as any user; pgbouncer logs in to the server as
  // the database line says (the test server's own credentials).
  const server = [`host=${target.hostname}`, `port=${target.port || 5432}`, `dbname=${database}`, `user=${user}`,
    ...(password ? [`password=${password}`] : [])].join(' ');
  writeFileSync(ini, `[databases]
${database} = ${server} pool_size=${opts.poolSize ?? 1}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 200
default_pool_size = ${opts.poolSize ?? 1}
min_pool_size = 0
reserve_pool_size = 0
server_lifetime = 3600
server_idle_timeout = 600
ignore_startup_parameters = extra_float_digits
server_reset_query = DISCARD ALL
server_reset_query_always = ${opts.resetEveryTransaction ? 1 : 0}
`, { mode: 0o644 });
  const as = runAs();
  const child: ChildProcess = spawn(PGBOUNCER, [...(as ? ['-u', as] : []), ini], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout!.on('data', (c) => { log += c; });
  child.stderr!.on('data', (c) => { log += c; });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pgbouncer did not start within 10 s: ${log}`)), 10_000);
    const check = () => {
      if (/process up|listening on 127\.0\.0\.1/.test(log)) { clearTimeout(timer); resolve(); }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    void exited.then(() => { clearTimeout(timer); reject(new Error(`pgbouncer exited: ${log}`)); });
  });
  await ready;
  const url = `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  return {
    url, port, log: () => log,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGINT');
        const killed = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killed);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
