// Runs the built `subagent-context` command as a child process, the way an operator or a cron job does.
// The global setup builds it once per run (test/setup/prepare.ts) into dist/.test-cli/ (gitignored with
// dist/), so engineers running `tsc` on dist/src never overwrite the build in use.
import { execFile } from 'node:child_process';
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
