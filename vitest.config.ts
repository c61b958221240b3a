import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/setup/postgres.ts'],
    // Every file gets its own database (a template clone). Three files at a time: most of a file's time
    // is spent waiting on PostgreSQL or a child process, so a third worker fills a 2-core machine's idle
    // time without starving it.
    fileParallelism: true,
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
