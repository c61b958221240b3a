// One verdict (docs/health.md `status`): computed once, in subagent_context_health(), first match wins, and
// shown as it is by `health` and `report` (terminal, JSON and HTML). The cases where the old surfaces
// disagreed: a disabled trigger with a shortfall, and an activated database with nothing captured.
import { describe, expect, it } from 'vitest';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { utcTimestamp } from '../../src/timestamp.js';

const db = await freshDatabase('one_verdict');
const cli = builtCli();

async function surfaces(schema: string) {
  const sql = (await db.query(`SELECT status FROM "${schema}".subagent_context_health()`)).rows[0].status;
  const health = await runCli(cli, ['health', '--json', '--database-url', db.url, '--schema', schema]);
  const report = await runCli(cli, ['report', '--json', '--database-url', db.url, '--schema', schema]);
  const file = join(tmpdir(), `one-verdict-${schema}-${process.pid}.html`);
  await runCli(cli, ['report', '--html', file, '--database-url', db.url, '--schema', schema]);
  const html = await readFile(file, 'utf8');
  await rm(file, { force: true });
  return {
    sql,
    health: JSON.parse(health.stdout).status,
    healthExit: health.code,
    report: JSON.parse(report.stdout).health.status,
    html: /id="health-status"[^>]*>([^<]*)</.exec(html)?.[1],
  };
}

describe('a disabled trigger and a shortfall at once', async () => {
  await db.createHost('off_short');
  await db.up('off_short');
  const t = await createTurn(db.pool, 'off_short', 'b');
  await db.query(`ALTER TABLE off_short.task_session_messages DISABLE TRIGGER subagent_context_capture`);
  await insertMessage(db.pool, 'off_short', { id: 'm', session: t.session, task: t.task, turn: t.turn,
    created_at: utcTimestamp(Date.now() + 60_000),
    metadata: subagentMetadata({ tool_call_id: 'toolu_missed', status: 'pending', subagent: {} }) });

  it('is trigger_disabled everywhere (the first match), with exit 2', async () => {
    expect((await db.query(`SELECT shortfall FROM off_short.subagent_context_health()`)).rows[0].shortfall).toBe(1n);
    expect(await surfaces('off_short')).toEqual({
      sql: 'trigger_disabled', health: 'trigger_disabled', healthExit: 2, report: 'trigger_disabled', html: 'trigger_disabled' });
  });
});

describe('activated, nothing captured since', async () => {
  await db.createHost('quiet');
  await db.up('quiet');

  it('is idle everywhere, with exit 0', async () => {
    expect(await surfaces('quiet')).toEqual({ sql: 'idle', health: 'idle', healthExit: 0, report: 'idle', html: 'idle' });
  });
});
