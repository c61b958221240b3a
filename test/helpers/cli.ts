// Runs the built `subagent-context` command as a child process, the way an operator or a cron job does.
// Each test file builds its own copy (dist/.test-cli/<label>, gitignored with dist/) so files running
// in parallel, and engineers running `tsc` on dist/src, never overwrite a build in use. A copy is
// rebuilt only when a source file is newer than it.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** Builds the CLI for this test file when stale; returns the path of its cli.js. */
export function buildCli(label: string): string {
  const outDir = join(PACKAGE_ROOT, 'dist', '.test-cli', label);
  const cli = join(outDir, 'src', 'cli.js');
  if (!existsSync(cli) || statSync(cli).mtimeMs < newestSource(join(PACKAGE_ROOT, 'src'))) {
    const tsc = join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    try {
      execFileSync(process.execPath, [tsc, '-p', join(PACKAGE_ROOT, 'tsconfig.json'), '--outDir', outDir],
        { cwd: PACKAGE_ROOT, stdio: 'pipe' });
    } catch (err) {
      // tsc still emits on type errors elsewhere (another engineer's work in progress); only a
      // missing cli.js stops us.
      if (!existsSync(cli)) throw err;
    }
  }
  return cli;
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
