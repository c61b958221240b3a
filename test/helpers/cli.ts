// Runs the built `subagent-context` command as a child process, the way an operator or a cron job does.
// The global setup builds it once per run (test/setup/prepare.ts) into dist/.test-cli/ (gitignored with
// dist/), so engineers running `tsc` on dist/src never overwrite the build in use.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { inject } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The path of the built CLI's cli.js. */
export function builtCli(): string {
  return inject('cliPath');
}

/** Runs `subagent-context ...args`; never rejects on a non-zero exit. Not a TTY: no colour, no progress. */
export function runCli(cli: string, args: string[], env: Record<string, string | undefined> = { DATABASE_URL: undefined }): Promise<CliResult> {
  return new Promise((resolve) => {
    const childEnv: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1', ...env };
    for (const [k, v] of Object.entries(childEnv)) if (v === undefined) delete childEnv[k];
    execFile(process.execPath, [cli, ...args], { env: childEnv as NodeJS.ProcessEnv, cwd: PACKAGE_ROOT },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
  });
}

export interface RunningCli<T> {
  child: ChildProcess;
  exited: Promise<number | null>;
  /** What `ready` read from stdout. */
  value: T;
  /** Everything the command wrote to stderr so far. */
  stderr(): string;
}

/**
 * Starts a command that keeps running (`demo --keep`, `metrics --listen`) and waits until `ready`
 * finds what it needs in the stdout written so far; rejects, with its stderr, if it exits first.
 * It is pushed onto `started` at once, so the caller's afterAll can kill it even when it never got ready.
 */
export async function startCli<T>(cli: string, args: string[], env: Record<string, string | undefined>,
  ready: (stdout: string) => T | undefined, started: ChildProcess[]): Promise<RunningCli<T>> {
  const child = spawn(process.execPath, [cli, ...args],
    { cwd: PACKAGE_ROOT, env: { ...process.env, ...env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '', err = '';
  child.stderr.on('data', (c) => { err += c; });
  const value = await new Promise<T>((resolve, reject) => {
    child.stdout.on('data', (c) => {
      out += c;
      const v = ready(out);
      if (v !== undefined) resolve(v);
    });
    void exited.then((code) => reject(new Error(`${args[0]} exited (${code}) before it was ready: ${err}`)));
  });
  return { child, exited, value, stderr: () => err };
}

/** The address `metrics --listen` serves, read from its start line (for startCli's `ready`). */
export const exporterUrl = (out: string): string | undefined => out.match(/on (http:\/\/127\.0\.0\.1:\d+\/metrics)\n/)?.[1];
