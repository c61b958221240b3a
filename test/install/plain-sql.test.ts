// The SQL in sql/ is plain SQL a DBA can read and run: @extschema@ (the target schema) is its only
// placeholder, and psql installs capture from the files as written, in sql/manifest.txt's order, by
// docs/install.md's "By hand, with psql" commands (the data the loader would pass, the installation
// record, given by hand).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MANIFEST } from '#sql';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freshDatabase } from '../helpers/database.js';
import { blocksUnder, runShell } from '../helpers/doc-blocks.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { utcTimestamp } from '../../src/timestamp.js';

const SQL = join(PACKAGE_ROOT, 'sql');
const files = readdirSync(SQL, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sql'));
const psql = spawnSync('psql', ['--version']).status === 0;
if (!psql) console.warn('plain-sql.test.ts: no psql on this machine; the psql install is skipped (the placeholder check runs)');
const db = await freshDatabase('plain_sql', { from: 'host' });

describe('sql/: plain SQL', () => {
  it('has no placeholder but @extschema@', () => {
    expect(files.length).toBeGreaterThan(30);
    const others = files.flatMap((f) => [...readFileSync(join(SQL, f), 'utf8').matchAll(/@[A-Za-z_]+(\([^)]*\))?@/g)]
      .map((m) => m[0]).filter((p) => p !== '@extschema@').map((p) => `${f}: ${p}`));
    expect(others).toEqual([]);
  });

  it('lists every installation file in sql/manifest.txt, each once per section, and nothing that is not there', () => {
    const listed = Object.values(MANIFEST).flat();
    const layers = files.filter((f) => /^(data|code|guards|indexes|uninstall)\//.test(f));
    expect([...new Set(listed)].sort()).toEqual(layers.filter((f) => f !== 'guards/migration-guard.sql').sort());
    for (const [section, list] of Object.entries(MANIFEST)) expect(new Set(list).size, section).toBe(list.length);
  });

  it.skipIf(!psql)('installs under psql by docs/install.md, in the manifest\'s order: capture, the backfill and health work', async () => {
    const [block] = blocksUnder('install.md', 'By hand, with psql');
    const run = await runShell(block!.text.replace('P=node_modules/subagent-context', 'P=.'), PACKAGE_ROOT, { DATABASE_URL: db.url });
    expect(run.code, run.stderr).toBe(0);
    const t = await createTurn(db.pool, 'public', 'psql');
    await insertMessage(db.pool, 'public', { id: 'by-psql', session: t.session, task: t.task, turn: t.turn, created_at: utcTimestamp(),
      metadata: subagentMetadata({ tool_call_id: 'toolu_psql', status: 'completed', subagent: { subagent_type: 'explorer', total_tokens: 7 } }) });
    expect((await db.query(`SELECT tool_call_id, subagent_type, total_tokens FROM task_session_subagents`)).rows)
      .toEqual([{ tool_call_id: 'toolu_psql', subagent_type: 'explorer', total_tokens: 7n }]);
    expect((await db.query(`SELECT status, shortfall, installed_version FROM subagent_context_health()`)).rows[0])
      .toEqual({ status: 'healthy', shortfall: 0n, installed_version: 'by-hand' });
  });
});
