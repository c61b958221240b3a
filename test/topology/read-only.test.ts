// On a server that takes no writes (a standby, or default_transaction_read_only), every command says in one
// sentence what it can and cannot do there (docs/install.md#read-only-servers): the readers work, the
// writers refuse before they attempt anything.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { READ_ONLY_SENTENCE } from '../../src/db.js';

const db = await freshDatabase('read_only', { from: 'installed' });
const cli = builtCli();
await db.query(`ALTER DATABASE "${db.name}" SET default_transaction_read_only = on`);

describe('a read-only database', () => {
  it.each([['up'], ['backfill'], ['repair'], ['uninstall'], ['uninstall', '--drop-data']])('%s refuses in one sentence that says where to run it', async (...args) => {
    const r = await runCli(cli, [...args, '--database-url', db.url]);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(READ_ONLY_SENTENCE);
  });

  it.each([['health'], ['report'], ['metrics', '--once']])('%s reads', async (...args) => {
    const r = await runCli(cli, [...args, '--database-url', db.url]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('the installation is untouched', async () => {
    const c = await db.connect();
    const { rows } = await c.query(`SELECT status FROM subagent_context_health()`);
    expect(rows).toHaveLength(1);
    expect((await c.query(`SELECT current_setting('default_transaction_read_only') AS v`)).rows[0].v).toBe('on');
  });
});
