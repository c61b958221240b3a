// What `up` prints on Citus (docs/citus.md, step 3): each thing once, and only what is true there. The
// operator created task_session_subagents distributed before `up` (step 2), so `up` adopts it without a
// note: nothing about kandev's own writer, which on a plain server is what adopting kandev's table means.
import { beforeAll, describe, expect, it } from 'vitest';
import { freshCitusDatabase } from '../helpers/citus.js';
import { builtCli, runCli } from '../helpers/cli.js';

const db = await freshCitusDatabase('up_output', 'citus/up-output.test.ts');
const cli = builtCli();

describe.skipIf(!db)('up on a Citus coordinator', () => {
  beforeAll(async () => {
    await db!.createHost('kandev');
    await db!.createHost('again');
  }, 120_000);

  it('says each thing once, and no note about a table the operator was told to create', async () => {
    const r = await runCli(cli, ['up', '--database-url', db!.url, '--schema', 'kandev']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n').filter((l) => l.trim());
    expect(lines.filter((l) => lines.indexOf(l) !== lines.lastIndexOf(l)), 'lines printed more than once').toEqual([]);
    expect(lines.filter((l) => l.startsWith('note:'))).toEqual([]);
    expect(r.stdout).not.toContain('kandev >= 0.89');
    expect(lines[0]).toMatch(/^applied migrations: /);
    expect(lines.at(-1)).toBe('installed and activated');
  });

  it('--json: no notices either', async () => {
    const r = await runCli(cli, ['up', '--json', '--database-url', db!.url, '--schema', 'again']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).notices).toEqual([]);
  }, 300_000);
});
