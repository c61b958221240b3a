import { defineConfig } from 'vitest/config';

// The tests about the host (capture, backfill, health, hostile input, concurrency, table adoption) live
// in test/host/ and run twice: on the minimal host and on the tables as kandev 0.91's fresh boot leaves
// them (kandev/schema/kandev-0.91.sql). test/helpers/database.ts reads the project's hostShape.

export default defineConfig({
  test: {
    globalSetup: ['test/setup/postgres.ts'],
    // Every file gets its own database (a template clone). Three files at a time: most of a file's time
    // is spent waiting on PostgreSQL or a child process, so a third worker fills a 2-core machine's idle
    // time without starving it.
    fileParallelism: true,
    maxWorkers: 3,
    // Files in one worker share its module cache (pg, node-pg-migrate, src/ are loaded once per worker,
    // not once per file). Safe because no test file or helper changes shared state: the only process-wide
    // settings (pg's type parsers) are the same everywhere, nothing is mocked, no env is set at run time.
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'minimal', include: ['test/**/*.test.ts'], provide: { hostShape: 'minimal' } } },
      { extends: true, test: { name: 'kandev-0.91', include: ['test/host/**/*.test.ts'], provide: { hostShape: 'kandev-0.91' } } },
    ],
  },
});
