// README.md#commands: terminal output never passes agent-written text through raw. A subagent_type, a model and a
// card title that carry escape sequences (recolour, retitle the window, clear the screen) are written
// by an agent; every command that prints text from the database is run on a real pseudo-terminal
// (util-linux `script`) and through a pipe, and must show those characters escaped.
import { describe, it, expect } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { createTurn, insertMessage, subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const TYPE = 'x\u001b[31mRED\u001b]0;pwned\u0007';
const MODEL = 'evil\u001b[2J';
const TITLE = 'card\u009b2J\u001b]8;;http://evil\u0007link';
// What safe() shows instead: each control character as a visible \xNN.
const TYPE_SHOWN = 'x\\x1b[31mRED\\x1b]0;pwned\\x07';
const MODEL_SHOWN = 'evil\\x1b[2J';

const db = await freshDatabase('terminal_safety');
await db.createHost('public');
await db.up('public');
{
  const c = await db.connect();
  try {
    const t = await createTurn(c, 'public', 'hostile', new Date().toISOString());
    await c.query('UPDATE tasks SET title = $1 WHERE id = $2', [TITLE, t.task]);
    const now = new Date().toISOString();
    await insertMessage(c, 'public', { id: 'm-hostile-1', session: t.session, task: t.task, turn: t.turn, created_at: now,
      metadata: subagentMetadata({ tool_call_id: 'toolu_hostile_1', status: 'completed',
        subagent: { subagent_type: TYPE, status: 'completed', model: MODEL, total_tokens: 10, duration_ms: 1000 } }) });
    await insertMessage(c, 'public', { id: 'm-hostile-2', session: t.session, task: t.task, turn: t.turn, created_at: now,
      metadata: subagentMetadata({ tool_call_id: 'toolu_hostile_2', status: 'in_progress', subagent: { subagent_type: TYPE, model: MODEL } }) });
  } finally {
    await c.end();
  }
}
const cli = builtCli();

/** Every command that prints text from the database, as an operator runs it. */
const COMMANDS: string[][] = [
  ['report'], ['report', '--width', '200'], ['report', '--since', '7d'],
  ['health'], ['backfill'], ['repair'], ['up'], ['metrics', '--once'],
];
const quote = (a: string) => `'${a.replaceAll("'", "'\\''")}'`;

/** The command on a pseudo-terminal: stdout is a TTY, so colour is on unless NO_COLOR is set. */
function onTerminal(args: string[], noColor: boolean): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: db.url };
  if (noColor) env.NO_COLOR = '1'; else delete env.NO_COLOR;
  return new Promise((resolve, reject) => execFile('/usr/bin/script',
    ['-qfec', [process.execPath, cli, ...args].map(quote).join(' '), '/dev/null'], { cwd: PACKAGE_ROOT, env },
    (err, stdout) => (err && typeof err.code !== 'number' ? reject(err) : resolve(stdout))));
}

/** Control characters other than the line ends a terminal needs (a pty turns \n into \r\n). */
const CONTROL = /[\u0000-\u0009\u000b\u000c\u000e-\u001f\u007f-\u009f]/;
// The project's own sequences on a terminal: bold, dim, green, yellow and reset, and the progress
// line's erase-line; nothing else.
const OWN_SGR = /\u001b\[(?:(?:0|1|2|32|33)m|K)/g;

describe('agent-written text on the terminal', () => {
  it('is set up: the hostile values are in the table as the agent wrote them', async () => {
    const { rows } = await db.query('SELECT DISTINCT subagent_type, model FROM task_session_subagents');
    expect(rows).toEqual([{ subagent_type: TYPE, model: MODEL }]);
  });

  it.each(COMMANDS)('%s through a pipe shows no control character', async (...args) => {
    const r = await runCli(cli, args, { DATABASE_URL: db.url });
    expect(r.code, r.stderr).toBeLessThan(3);
    expect(r.stdout + r.stderr).not.toMatch(CONTROL);
    if (args[0] === 'report') {
      expect(r.stdout).toContain(MODEL_SHOWN);
      expect(r.stdout).toContain('card\\x9b2J\\x1b]8;;http://evil\\x07link');
    }
    if (args.includes('200')) expect(r.stdout).toContain(TYPE_SHOWN);
  });

  it.skipIf(!existsSync('/usr/bin/script')).each(COMMANDS)('%s on a terminal shows no control character but its own colours', async (...args) => {
    const plain = await onTerminal(args, true);
    expect(plain.replace(OWN_SGR, "")).not.toMatch(CONTROL);
    const coloured = await onTerminal(args, false);
    // Red (31) is the project's colour for errors only, never printed here: a \x1b[31m would be the agent's.
    expect(coloured).not.toContain('\u001b[31m');
    expect(coloured).not.toContain('\u001b]');
    expect(coloured).not.toContain('\u001b[2J');
    expect(coloured.replace(OWN_SGR, '')).not.toMatch(CONTROL);
    // The project's own colours stay colours: escaping must not reach them (\x1b[32m shown as text).
    expect(coloured).not.toMatch(/\\x1b\[(?:0|1|2|32|33)m/);
    if (args[0] === 'health') expect(coloured).toContain('\u001b[32mhealthy\u001b[0m');
    if (args[0] === 'report') {
      expect(plain).toContain(MODEL_SHOWN);
      expect(coloured).toContain(MODEL_SHOWN);
    }
    if (args.includes('200')) expect(plain).toContain(TYPE_SHOWN);
  });
});
