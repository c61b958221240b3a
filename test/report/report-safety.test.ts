// `report` on a live production database with hostile text in it: --json and --html carry no raw
// control or bidi character (escaped as the terminal report escapes them), and no query of the report
// runs forever: a statement timeout (--statement-timeout, else the session's, else 5 minutes) stops it
// with one sentence, exit 3.
import { describe, it, expect } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { utcTimestamp } from '../../src/timestamp.js';

// Right-to-left override, the 8-bit CSI, ESC and BEL, a line separator: what a hostile agent writes.
const TYPE = 'evil\u202eexe.txt\u009b2J\u001b]0;pwned\u0007\u2028';
const TITLE = 'card\u001b[2J\u0007';
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/;

const db = await freshDatabase('report_safety', { from: 'installed' });
{
  const t = await createTurn(db.pool, 'public', 'hostile', new Date().toISOString());
  await db.query('UPDATE tasks SET title = $1 WHERE id = $2', [TITLE, t.task]);
  await insertMessage(db.pool, 'public', { id: 'm-hostile', session: t.session, task: t.task, turn: t.turn,
    created_at: utcTimestamp(),
    metadata: subagentMetadata({ tool_call_id: 'toolu_hostile', status: 'in_progress', subagent: { subagent_type: TYPE, model: TYPE } }) });
}
const cli = builtCli();
const env = { DATABASE_URL: db.url };

describe('hostile text in --json and --html', () => {
  it('--json escapes control and bidi characters as \\u escapes and stays the same JSON value', async () => {
    const r = await runCli(cli, ['report', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(RAW);
    expect(r.stdout).toContain('"subagent_type": "evil\\u202eexe.txt\\u009b2J\\u001b]0;pwned\\u0007\\u2028"');
    const report = JSON.parse(r.stdout);
    expect(report.by_subagent_type[0].subagent_type).toBe(TYPE);
    expect(report.running[0].title).toBe(TITLE);
  });

  it('--html shows them escaped, as the terminal report does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'subagent-context-safety-'));
    try {
      const file = join(dir, 'r.html');
      expect((await runCli(cli, ['report', '--html', file], env)).code).toBe(0);
      const html = readFileSync(file, 'utf8');
      expect(html).not.toMatch(RAW);
      expect(html).toContain('evil\\u202eexe.txt\\x9b2J\\x1b]0;pwned\\x07\\u2028');
      expect(html).toContain('card\\x1b[2J\\x07');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('statement timeout', () => {
  /** Runs `report` while another session holds task_session_subagents locked: its first query waits. */
  async function whileLocked(args: string[], extraEnv: Record<string, string> = {}) {
    const locker = await db.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE task_session_subagents IN ACCESS EXCLUSIVE MODE');
    try {
      const started = performance.now();
      const r = await runCli(cli, ['report', ...args], { ...env, ...extraEnv });
      return { ...r, seconds: (performance.now() - started) / 1000 };
    } finally {
      await locker.query('ROLLBACK');
    }
  }

  it('--statement-timeout stops a query that waits or runs longer, in one sentence, exit 3', async () => {
    const r = await whileLocked(['--statement-timeout', '1s']);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe('error: the report was stopped after its statement timeout (1s): narrow the window with ' +
      '--since/--until, or allow more time with --statement-timeout (0 for none).');
    expect(r.seconds).toBeLessThan(15);
  });

  it('a timeout the session already has (PGOPTIONS) is kept', async () => {
    const r = await whileLocked(['--json'], { PGOPTIONS: '-c statement_timeout=1500' });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('stopped after its statement timeout (1500ms)');
  });

  it('a bad value is a usage error before connecting', async () => {
    const r = await runCli(cli, ['report', '--statement-timeout', 'soon', '--database-url', 'postgres://nobody@127.0.0.1:1/none']);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: --statement-timeout must be a duration like 30s, 5min or 1h (0 for none), got "soon".');
  });
});
