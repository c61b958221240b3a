import { configDefaults, defineConfig } from 'vitest/config';

// Four projects, chosen by folder (test/README.md):
//   unit         test/unit/: pure modules, no database, no global setup: `npm run test:unit` in seconds;
//   minimal      every other test file (the subject folders, test/host/, test/citus/), on the minimal host
//                (kandev/host.ts HOST_SHAPES);
//   kandev-0.91  test/host/ once more, on the tables as kandev 0.91's fresh boot leaves them
//                (kandev/schema/kandev-0.91.sql): the files about the host (capture, backfill, health,
//                hostile input, concurrency, table adoption). test/helpers/database.ts reads hostShape;
//   kandev-0.92  test/host/ a third time, on kandev after 0.91 (kandev-0.92.sql on top: nullable turn_id,
//                payload columns, four metadata expression indexes). All of test/host/, not a pick: its
//                files are the ones whose outcome depends on the host's shape, and together they add
//                about a tenth to a full run.
// The database projects name the global setup themselves, so a unit-only run starts no server; when
// both run, test/setup/postgres.ts starts the one server for both.
const DATABASE = ['test/setup/postgres.ts'];

export default defineConfig({
  test: {
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
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { extends: true, test: { name: 'minimal', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/unit/**'],
        globalSetup: DATABASE, provide: { hostShape: 'minimal' } } },
      { extends: true, test: { name: 'kandev-0.91', include: ['test/host/**/*.test.ts'],
        globalSetup: DATABASE, provide: { hostShape: 'kandev-0.91' } } },
      { extends: true, test: { name: 'kandev-0.92', include: ['test/host/**/*.test.ts'],
        globalSetup: DATABASE, provide: { hostShape: 'kandev-0.92' } } },
    ],
  },
});
