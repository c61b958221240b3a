// docs/citus.md as an operator follows it, on a fresh database of the cluster: kandev's tables as kandev
// created them, then the SQL of steps 1 and 2 statement by statement as psql sends it, then the command
// lines of steps 3 and 4 as written (the doc's URL is this database's), each exiting 0.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { freshCitusDatabase } from '../helpers/citus.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { blocksUnder } from '../helpers/doc-blocks.js';
import { createHostTables } from '../../kandev/host.js';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const DOC = 'citus.md';
const STEP = {
  1: "1. kandev's tables, distributed (kandev's side)",
  2: '2. The two tables capture writes, created distributed before `up`',
  3: '3. `up`, on the coordinator',
  4: '4. Every command, on the coordinator',
};
const DOC_URL = 'postgres://postgres@coordinator:5432/kandev';

const db = await freshCitusDatabase('docs', 'citus/docs.test.ts');
const cli = builtCli();

/** A block's statements, as psql sends them: one at a time (these blocks hold no dollar-quoted bodies). */
const statements = (sql: string) => sql.split(/;\s*$/m).map((x) => x.replace(/--[^\n]*/g, '').trim()).filter(Boolean);
const only = (step: keyof typeof STEP, lang: string) => {
  const blocks = blocksUnder(DOC, STEP[step]).filter((b) => b.lang === lang);
  expect(blocks, `${DOC} step ${step}: one ${lang} block`).toHaveLength(1);
  return blocks[0]!.text;
};
/** The doc's command lines, as words, with the doc's URL made this database's. */
const commandLines = (sh: string) => sh.split('\n').filter((l) => l.startsWith('subagent-context '))
  .map((l) => l.split(/\s+/).slice(1).map((w) => (w === DOC_URL ? db!.url : w)));

describe.skipIf(!db)(`${DOC}, step by step, on a fresh database`, () => {
  let c: pg.Client;
  beforeAll(async () => {
    c = await db!.connect();
    await createHostTables(c, 'public');  // kandev's tables as kandev made them: plain, on the coordinator
  }, 120_000);

  it('the SQL of steps 1 and 2 is what kandev/schema/ holds, and runs as written', async () => {
    for (const [step, file] of [[1, 'kandev-citus.sql'], [2, 'kandev-citus-capture-tables.sql']] as const) {
      const block = statements(only(step, 'sql'));
      const fixture = statements(readFileSync(join(PACKAGE_ROOT, 'kandev', 'schema', file), 'utf8').replaceAll('@extschema@.', ''));
      const words = (x: string) => x.replace(/\s+/g, ' ');
      expect(block.map(words), `${DOC} step ${step} and kandev/schema/${file}`).toEqual(fixture.map(words));
      for (const statement of block) await c.query(statement);
    }
    const { rows } = await c.query(`SELECT logicalrelid::text AS t FROM pg_dist_partition WHERE partmethod = 'h' ORDER BY 1`);
    expect(rows.map((r) => r.t)).toEqual(['subagent_context_failures', 'task_session_messages', 'task_session_subagents',
      'task_session_turns', 'task_sessions']);
  });

  it('step 3: up, as written', async () => {
    await writeSubagentCalls(c, 'public', { calls: 50, sessions: 10, prefix: 'h', base: '2026-08-01 10:00:00' });
    const lines = commandLines(only(3, 'sh'));
    expect(lines.map((l) => l[0])).toEqual(['up']);
    const r = await runCli(cli, lines[0]!);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('rows backfilled   50');
  });

  it('step 4: every command, as written, exits 0', async () => {
    await writeSubagentCalls(c, 'public', { calls: 20, sessions: 10, prefix: 'l', sessionsOf: 'h', base: await afterActivation(c, 'public'), step: '1 millisecond' });
    const lines = commandLines(only(4, 'sh'));
    expect(lines.map((l) => l[0])).toEqual(['health', 'health', 'repair', 'report', 'backfill']);
    for (const args of lines) {
      const r = await runCli(cli, args);
      expect({ command: args.filter((a) => a !== db!.url).join(' '), code: r.code, stderr: r.stderr })
        .toEqual({ command: args.filter((a) => a !== db!.url).join(' '), code: 0, stderr: '' });
    }
    const health = await runCli(cli, ['health', '--json', '--database-url', db!.url]);
    expect(JSON.parse(health.stdout)).toMatchObject({ status: 'healthy', shortfall: 0 });
  }, 300_000);
});
