// The command blocks of a doc, as a user copies them: found under their heading, run as written.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** A doc of docs/ (or README.md), as text. */
export function readDoc(doc: string): string {
  return readFileSync(doc === 'README.md' ? join(PACKAGE_ROOT, doc) : join(PACKAGE_ROOT, 'docs', doc), 'utf8');
}

/** The fenced blocks under `heading` (up to the next heading of any level), with their language. */
export function blocksUnder(doc: string, heading: string): Array<{ lang: string; text: string }> {
  const blocks: Array<{ lang: string; text: string }> = [];
  let inSection = false, found = false;
  let open: { lang: string; lines: string[] } | null = null;
  for (const line of readDoc(doc).split('\n')) {
    if (open) {
      if (line === '```') { if (inSection) blocks.push({ lang: open.lang, text: open.lines.map((l) => `${l}\n`).join('') }); open = null; }
      else open.lines.push(line);
      continue;
    }
    const fence = /^```(\w*)$/.exec(line);
    if (fence) { open = { lang: fence[1]!, lines: [] }; continue; }
    if (/^#+ /.test(line)) {
      inSection = line.replace(/^#+ /, '') === heading;
      found ||= inSection;
    }
  }
  if (!found) throw new Error(`${doc} has no heading "${heading}"`);
  return blocks;
}

export interface ShellResult { code: number; stdout: string; stderr: string }

/**
 * Runs a doc's shell block with bash (-e: a failing line stops it, as a careful user would). `merged`:
 * stderr into stdout, in the order a terminal shows them (what a doc's output block shows).
 */
export function runShell(script: string, cwd: string, env: Record<string, string>, opts: { merged?: boolean } = {}): Promise<ShellResult> {
  const text = opts.merged ? `{\n${script}\n} 2>&1` : script;
  return new Promise((resolve) => execFile('bash', ['-e', '-o', 'pipefail', '-c', text],
    { cwd, env: { ...process.env, NO_COLOR: '1', ...env }, maxBuffer: 16 * 1024 * 1024, timeout: 120_000 },
    (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr })));
}
