// A fresh database per test file (empty, or cloned from one of the run's templates: test/setup/prepare.ts),
// and helpers to create kandev's host tables and install capture into it.
import { inject, afterAll } from 'vitest';
import pg from 'pg';
import type { NoticeMessage } from 'pg-protocol/dist/messages.js';
import { startEmbeddedPostgres, SUPPORTED_MAJORS, type EmbeddedServer } from '../../demo/embedded.js';
import { randomBytes } from 'node:crypto';
import { createHostTables, insertMessage, isKandevShape, type HostOptions, type HostShape, type MessageWrite } from '../../kandev/host.js';
import { migrate, up } from '../../src/install.js';
import { urlFor, type Template } from '../setup/prepare.js';

/** What a 'notice' listener receives (RAISE WARNING/NOTICE); pg re-exports no name for it. */
export type Notice = NoticeMessage;

// Exact, time-zone-independent values: timestamps (UTC wall-clock in the host) as the text Postgres
// prints, bigint as BigInt.
pg.types.setTypeParser(1114, (v: string) => v);
pg.types.setTypeParser(20, (v: string) => BigInt(v));

export interface TestDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  /** A new dedicated connection (closed automatically at the end of the file). */
  connect(): Promise<pg.Client>;
  /** The host shape this run's project tests on (vitest.config.ts); createHost's default. */
  hostShape: HostShape;
  /**
   * Would this host refuse a message with this metadata? On the kandev 0.91 shape, kandev's
   * (metadata::jsonb ->> 'tool_call_id') index refuses whatever the jsonb cast refuses, before any
   * trigger runs; the minimal shape holds any text. Tests of unparseable metadata write it only where
   * the host can hold it (and assert the refusal where it cannot).
   */
  hostRefuses(metadata: string | null): Promise<boolean>;
  /** Host tables (+ kandev's metadata expression indexes, a partitioned messages table, when asked) in `schema`, of the project's shape unless `opts.shape` says otherwise. */
  createHost(schema?: string, opts?: HostOptions): Promise<void>;
  /** Migrations only (no backfill), as the product installs. */
  install(schema?: string): Promise<void>;
  /** `subagent-context up`: migrations and the guarded backfill. */
  up(schema?: string): ReturnType<typeof up>;
  query<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<T>>;
}

export { urlFor };

export interface FreshDatabaseOptions {
  /**
   * What the database starts with: nothing (the default); `host`, kandev's host tables in public (as
   * `createHost()` makes them); `installed`, those with `subagent-context up` run in public (as
   * `createHost()` then `up()`). Cloning a template costs what creating an empty database costs.
   */
  from?: Template;
}

/** Creates the database now (top-level await in the test file) and drops it after the file. */
export async function freshDatabase(label = 'test', opts: FreshDatabaseOptions = {}): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl');
  const name = `${inject('databasePrefix')}${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase().slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client(adminUrl);
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"${opts.from ? ` TEMPLATE "${inject('templates')[inject('hostShape') ?? 'minimal'][opts.from]}"` : ''}`);
  } finally {
    await admin.end();
  }
  const url = urlFor(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => {});
  const clients: pg.Client[] = [];

  async function connect() {
    const c = new pg.Client(url);
    c.on('error', () => {});
    await c.connect();
    clients.push(c);
    return c;
  }

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await pool.end();
    const a = new pg.Client(adminUrl);
    await a.connect();
    await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await a.end();
  });

  const withOne = async <T>(fn: (c: pg.Client) => Promise<T>) => {
    const c = new pg.Client(url);
    await c.connect();
    try { return await fn(c); } finally { await c.end(); }
  };

  const hostShape = inject('hostShape') ?? 'minimal';
  return {
    url, name, pool, connect, hostShape,
    hostRefuses: async (metadata) => {
      if (!isKandevShape(hostShape) || metadata === null) return false;
      return pool.query('SELECT $1::jsonb', [metadata]).then(() => false, () => true);
    },
    createHost: (schema = 'public', opts = {}) => withOne((c) => createHostTables(c, schema, { shape: hostShape, ...opts })),
    install: (schema = 'public') => withOne(async (c) => { await migrate(c, schema, 'up', 1); }),
    up: (schema = 'public') => withOne((c) => up(c, schema)),
    query: <T extends pg.QueryResultRow>(text: string, values?: unknown[]) => pool.query<T>(text, values),
  };
}

/** The major version of the suite's server, when it is one the embedded server can also run. */
async function suiteMajor(): Promise<string | undefined> {
  const c = new pg.Client(inject('adminUrl'));
  await c.connect();
  try {
    const { rows } = await c.query(`SELECT (current_setting('server_version_num')::int / 10000)::text AS major`);
    return (SUPPORTED_MAJORS as readonly string[]).includes(rows[0].major) ? rows[0].major : undefined;
  } finally {
    await c.end();
  }
}

/**
 * A private embedded server for tests that must kill or reconfigure theirs, of the same major as the
 * suite's server (so the system-15 run exercises 15). When that major's binaries are not installed
 * (`npm run pg-versions`; CI installs them) it falls back to the default major rather than skip.
 */
export async function startOwnServer(flags: string[] = []): Promise<EmbeddedServer> {
  const major = (await suiteMajor()) ?? process.env.PG_VERSION;
  try {
    return await startEmbeddedPostgres({ version: major, flags });
  } catch (err) {
    if (!/npm run pg-versions/.test(String(err))) throw err;
    console.warn(`${String(err)}; using the default embedded major`);
    return startEmbeddedPostgres({ version: '', flags });
  }
}

/**
 * Holds an ACCESS EXCLUSIVE lock on task_session_subagents (which health reads) on a connection of the
 * file's database, until the returned function releases it: a health query that must wait.
 */
export async function holdSubagentTableLock(db: TestDatabase): Promise<() => Promise<void>> {
  const c = await db.connect();
  await c.query('BEGIN');
  await c.query('LOCK TABLE task_session_subagents IN ACCESS EXCLUSIVE MODE');
  return async () => { await c.query('ROLLBACK'); };
}

/** A message written the way a bulk load or an apply worker writes it (replica role): no trigger fires. */
export async function writeUncaptured(db: TestDatabase, schema: string, m: MessageWrite): Promise<void> {
  const writer = await db.connect();
  await writer.query('SET session_replication_role = replica');
  await insertMessage(writer, schema, m);
  await writer.end();
}
