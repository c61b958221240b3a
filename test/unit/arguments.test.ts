// What the command line does before any command touches a database: --version, --help, unknown commands
// and options, stray arguments and conflicting flags. Each is answered on the terminal with exit 0 or,
// for a mistake, one sentence and exit 3 (never 1 or 2, which health uses for what it found).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/main.js';
import { ERROR_EXIT } from '../../src/errors.js';
import { PACKAGE_VERSION } from '#sql';

/** Runs `subagent-context ...argv` in-process; what it printed to stdout and stderr. */
async function run(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { out.push(a.join(' ')); });
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { err.push(a.join(' ')); });
  const code = await main(argv);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

afterEach(() => { vi.restoreAllMocks(); });

describe('the command line', () => {
  it('--version, -V and version print the version alone, exit 0, also after a command', async () => {
    for (const argv of [['--version'], ['-V'], ['version'], ['health', '--version']]) {
      expect(await run(...argv), argv.join(' ')).toEqual({ code: 0, stdout: PACKAGE_VERSION, stderr: '' });
    }
  });

  it('--help lists every command on stdout; no command at all prints the same on stderr, exit 3', async () => {
    const help = await run('--help');
    expect(help.code).toBe(0);
    for (const name of ['up', 'backfill', 'health', 'repair', 'report', 'metrics', 'uninstall', 'demo']) {
      expect(help.stdout).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
    }
    const none = await run();
    expect(none).toEqual({ code: ERROR_EXIT, stdout: '', stderr: help.stdout });
  });

  it("a command's --help prints its usage", async () => {
    const r = await run('metrics', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^subagent-context metrics/);
  });

  it('an unknown command is one sentence with the nearest command and --help, exit 3', async () => {
    const r = await run('hralth');
    expect(r).toEqual({ code: ERROR_EXIT, stdout: '',
      stderr: 'error: unknown command "hralth": did you mean `subagent-context health`? Run `subagent-context --help` for the list.' });
  });

  it("an unknown option names the option and the command's --help, exit 3", async () => {
    const r = await run('health', '--sinse', '7d');
    expect(r.code).toBe(ERROR_EXIT);
    expect(r.stderr).toBe('error: unknown option --sinse. Run `subagent-context health --help`.');
  });

  // On 4259581 a swap of two letters counted as two edits, too many for a five-letter option: no suggestion.
  it('two letters swapped in an option is a typo it names: report --sinec gets --since', async () => {
    for (const [command, typo, meant] of [['report', '--sinec', '--since'], ['uninstall', '--dorp-data', '--drop-data']]) {
      const r = await run(command!, typo!, '7d');
      expect(r).toEqual({ code: ERROR_EXIT, stdout: '',
        stderr: `error: unknown option ${typo}: did you mean ${meant}? Run \`subagent-context ${command} --help\`.` });
    }
  });

  it('a stray argument is refused: options start with --', async () => {
    const r = await run('up', 'public');
    expect(r.code).toBe(ERROR_EXIT);
    expect(r.stderr).toBe('error: up takes no arguments, got "public". Options start with --; run `subagent-context up --help`.');
  });

  it('flags that cannot be combined are refused before anything runs', async () => {
    const r = await run('metrics', '--once', '--listen', '127.0.0.1:0');
    expect(r).toEqual({ code: ERROR_EXIT, stdout: '',
      stderr: 'error: --listen and --once cannot be combined: pick one. Run `subagent-context metrics --help`.' });
  });

  it('an unknown command is shown escaped, never raw, on the terminal', async () => {
    const r = await run('x\u001b[2J');
    expect(r.stderr).toContain('"x\\x1b[2J"');
    expect(r.stderr).not.toContain('\u001b');
  });
});
