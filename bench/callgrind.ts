// Instruction counts of a PostgreSQL backend, per statement: a load-independent clock for in-server cost.
//
// A stopped cluster is copied, then one single-user backend (`postgres --single -j`) runs a script of
// statements under `valgrind --tool=callgrind --dump-before=exec_simple_query`: callgrind writes a profile
// every time a statement starts and zeroes its counters, and collects only inside exec_simple_query, so
// profile k+2 holds statement k and nothing else. No client, no other
// process, no clock: the same script on the same copy gives the same counts (case 07 checks it), whatever
// else the machine is doing. Each run starts from a fresh copy of the cluster so that runs compare.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readdirSync, readFileSync, rmSync, chmodSync, chownSync, openSync, closeSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface Owner { uid: number; gid: number }

/** As root, PostgreSQL runs as `postgres` (demo/embedded.ts creates that user when it starts a server). */
export function postgresOwner(): Owner | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** A SQL literal for the script: E'' with every backslash, quote and line break escaped (the script's
 * statements end with `;` and an empty line, so no literal may hold a raw line break). */
export function lit(v: string | number | null | undefined): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') return String(v);
  return `E'${v.replace(/\\/g, '\\\\').replace(/'/g, "''").replace(/\n/g, '\\n').replace(/\r/g, '\\r')}'`;
}

export function hasValgrind(): boolean {
  try { execFileSync('valgrind', ['--version'], { stdio: 'ignore' }); return true; } catch { return false; }
}

export interface CountOptions {
  /** The postgres binary (the one the cluster was made with). */
  postgres: string;
  /** A stopped cluster; it is copied, never written. */
  dataDir: string;
  database: string;
  owner?: Owner;
  /** Server settings for the single-user backend (-c name=value). */
  settings?: Record<string, string>;
}

/** Instructions of each statement of `statements`, run in order by one single-user backend under callgrind. */
export async function countInstructions(statements: string[], o: CountOptions): Promise<number[]> {
  for (const s of statements) if (/;\s*\n\s*\n/.test(s)) throw new Error('bench: a statement holds an empty line after a semicolon');
  const work = mkdtempSync(join(tmpdir(), 'scbench-callgrind-'));
  chmodSync(work, 0o755);
  try {
    const data = join(work, 'data');
    execFileSync('cp', ['-a', o.dataDir, data]);
    const out = join(work, 'out');
    execFileSync('mkdir', [out]);
    if (o.owner) { chownSync(data, o.owner.uid, o.owner.gid); chownSync(out, o.owner.uid, o.owner.gid); }
    // A last statement of its own, so the last measured one is not counted with the shutdown.
    const script = join(work, 'script.sql');
    writeFileSync(script, [...statements, 'SELECT 1'].map((s) => `${s};\n\n`).join(''));
    const settings = Object.entries({ fsync: 'off', max_wal_size: '4GB', ...o.settings }).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
    const stdin = openSync(script, 'r');
    try {
      await new Promise<void>((resolve, reject) => {
        // Collected only inside exec_simple_query: what a backend does between statements (reading the next
        // one, flushing its statistics once a second by the wall clock) is left out; it is not the
        // statement's cost, and its once-a-second part would make counts depend on speed.
        const child = spawn('valgrind', ['--tool=callgrind', '--collect-atstart=no', '--toggle-collect=exec_simple_query',
          '--dump-before=exec_simple_query', `--callgrind-out-file=${join(out, 'cg')}`,
          o.postgres, '--single', '-j', '-D', data, ...settings, o.database],
        { ...o.owner, stdio: [stdin, 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
        let stderr = '';
        const faults: string[] = [];
        child.stderr!.on('data', (c) => {
          stderr = (stderr + String(c)).slice(-4000);
          for (const line of String(c).split('\n')) if (/\b(ERROR|WARNING|FATAL|PANIC):/.test(line) && faults.length < 5) faults.push(line);
        });
        child.once('error', reject);
        child.once('close', (code) => {
          // A statement that fails does not stop a single-user backend: it would only be counted cheap.
          if (code === 0 && faults.length === 0) resolve();
          else reject(new Error(`single-user backend exited with ${code}${faults.length ? `; ${faults.join(' | ')}` : ''}: ${stderr}`));
        });
      });
    } finally {
      closeSync(stdin);
    }
    const counts = new Map<number, number>();
    for (const f of readdirSync(out)) {
      const m = /^cg\.(\d+)$/.exec(f);
      if (!m) continue;
      const s = /^summary: (\d+)/m.exec(readFileSync(join(out, f), 'utf8'));
      if (s) counts.set(Number(m[1]), Number(s[1]));
    }
    // cg.1 is start-up until the first statement; cg.(k+2) is statement k.
    const got = statements.map((_, k) => counts.get(k + 2));
    if (got.some((x) => x === undefined)) {
      throw new Error(`bench: ${got.filter((x) => x === undefined).length} of ${statements.length} statements have no profile (did the backend stop early?)`);
    }
    return got as number[];
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
