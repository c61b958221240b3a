// The SQL in sql/ is plain SQL a DBA can read and run: @extschema@ (the target schema) is its only
// placeholder, and psql installs capture from the files as written once it is replaced, in the loader's
// order, with the data the loader would pass (the installation record) given by hand.
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODE_FILES, DATA_FILES } from '#sql';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freshDatabase } from '../helpers/database.js';
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

  it.skipIf(!psql)('installs under psql as written, once @extschema@ is replaced: capture, the backfill and health work', async () => {
    const rendered = (names: string[]) => names.map((f) => readFileSync(join(SQL, f), 'utf8')).join('\n').replaceAll('@extschema@', 'public');
    const run = (sql: string, single: boolean) => execFileSync('psql', [db.url, '-q', '-X', '-v', 'ON_ERROR_STOP=1',
      ...(single ? ['--single-transaction'] : [])], { input: sql, env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' } });
    // The data and code layers in one transaction, and what the loader records after them.
    run(`${rendered(DATA_FILES)}\n${rendered(CODE_FILES)}\nSELECT public.subagent_context_record_installation('by-hand', 'by-hand');`, true);
    // Health's index outside a transaction (CREATE INDEX CONCURRENTLY), then the guarded backfill.
    run(rendered(['message-index.sql']), false);
    run('SELECT status FROM public.subagent_context_backfill();', false);
    const t = await createTurn(db.pool, 'public', 'psql');
    await insertMessage(db.pool, 'public', { id: 'by-psql', session: t.session, task: t.task, turn: t.turn, created_at: utcTimestamp(),
      metadata: subagentMetadata({ tool_call_id: 'toolu_psql', status: 'completed', subagent: { subagent_type: 'explorer', total_tokens: 7 } }) });
    expect((await db.query(`SELECT tool_call_id, subagent_type, total_tokens FROM task_session_subagents`)).rows)
      .toEqual([{ tool_call_id: 'toolu_psql', subagent_type: 'explorer', total_tokens: 7n }]);
    expect((await db.query(`SELECT status, shortfall, installed_version FROM subagent_context_health()`)).rows[0])
      .toEqual({ status: 'healthy', shortfall: 0n, installed_version: 'by-hand' });
  });
});
