// Backfill progress: on a terminal, `up` and `backfill` show how much history is being walked and, batch by
// batch, how far they are; piped or with --json they print no progress at all.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { backfill, historyEstimate } from '../../src/install.js';
import { MIGRATIONS } from '../helpers/migrations.js';

const db = await freshDatabase('backfill_progress');
const cli = builtCli();

async function withHistory(schema: string, messages: number) {
  await db.createHost(schema);
  const t = await createTurn(db.pool, schema, schema);
  for (let i = 0; i < messages; i++) {
    await insertMessage(db.pool, schema, { id: `m${i}`, session: t.session, task: t.task, turn: t.turn,
      created_at: `2026-08-12 09:00:0${i}`, metadata: subagentMetadata({ tool_call_id: `toolu_${i}` }) });
  }
  await db.query(`ANALYZE "${schema}".task_session_messages`);
}

/** A terminal stand-in that records what is painted. */
function terminal(isTTY: boolean) {
  const chunks: string[] = [];
  return { chunks, stream: { isTTY, write: (s: string) => { chunks.push(s); return true; } } };
}

describe('progress of the backfill statement', async () => {
  await withHistory('tty', 3);
  await db.install('tty');

  it('estimates the messages to walk from the planner statistics', async () => {
    const client = await db.connect();
    expect(await historyEstimate(client, 'tty')).toBe(3);
  });

  it('paints the estimate at once, then clears the line (the command prints the outcome once)', async () => {
    const client = await db.connect();
    const { chunks, stream } = terminal(true);
    const result = await backfill(client, 'tty', { progress: stream });
    expect(result.status).toBe('activated');
    expect(chunks[0]).toMatch(/^\r\x1b\[K⠋ backfill: walking ~3 candidate messages for subagent history, batch by batch {2}\d+\.\ds$/);
    expect(chunks.at(-1)).toBe('\r\x1b[K');
  });

  it('writes nothing to a stream that is not a terminal', async () => {
    await withHistory('pipe', 1);
    await db.install('pipe');
    const client = await db.connect();
    const { chunks, stream } = terminal(false);
    expect((await backfill(client, 'pipe', { progress: stream })).inserted).toBe(1);
    expect(chunks).toEqual([]);
  });
});

describe('the CLI', async () => {
  await withHistory('cli_pipe', 2);
  await withHistory('cli_json', 2);
  await withHistory('cli_tty', 2);

  it('up, piped: plain lines, no progress; says how many rows the backfill stored', async () => {
    const r = await runCli(cli, ['up', '--database-url', db.url, '--schema', 'cli_pipe']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`applied migrations: ${MIGRATIONS.join(', ')}`);
    expect(lines[1]).toBe('backfill: activated');
    expect(lines[2]).toBe('  rows backfilled   2');
    expect(lines[3]).toMatch(/^ {2}capture_since {5}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}000Z$/);
    expect(lines[4]).toBe('  backfill_through  2026-08-12T09:00:01.000000000Z');
    expect(lines[5]).toBe('installed and activated');
    expect(lines).toHaveLength(6);
  });

  it('up --json: one JSON object on stdout, nothing on stderr', async () => {
    const r = await runCli(cli, ['up', '--database-url', db.url, '--schema', 'cli_json', '--json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const body = JSON.parse(r.stdout);
    expect(body.applied).toEqual(MIGRATIONS);
    expect(body.backfill).toMatchObject({ status: 'activated', inserted: 2, failure: null,
      backfill_through: '2026-08-12T09:00:01.000000000Z' });
  });

  it.skipIf(!existsSync('/usr/bin/script'))('up on a terminal shows the walk estimate, and the outcome once', () => {
    // util-linux `script` runs the command on a pseudo-terminal: the real TTY path, end to end.
    const command = [process.execPath, cli, 'up', '--database-url', db.url, '--schema', 'cli_tty']
      .map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
    const out = execFileSync('/usr/bin/script', ['-qec', command, '/dev/null'],
      { env: { ...process.env, NO_COLOR: '1' }, encoding: 'utf8' });
    expect(out).toContain('backfill: walking ~2 candidate messages');
    // The progress line is cleared, not replaced: the outcome is printed once, by the summary.
    expect(out.match(/backfill: activated/g)).toHaveLength(1);
    expect(out).toMatch(/rows backfilled +2\r?\n/);
    expect(out).toContain('installed and activated');
  });
});
