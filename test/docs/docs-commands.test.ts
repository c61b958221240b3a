// The docs' terminal sessions are run, not kept true by hand. Every ```console block of docs/*.md and
// README.md holds commands (`$ subagent-context …`) each followed by what it prints; this file runs them,
// in the order the doc shows them, against one database per doc (kandev's tables with the demo's
// history, nothing installed), and compares what they print with the doc.
//
// How to write one (the doc is what the reader sees, so the rules are few):
//   - `$ subagent-context ARGS`: run with DATABASE_URL set; `--database-url postgres://USER@HOST/kandev`
//     in a doc means the test's database. A non-zero exit is printed as `[exit N]` after the output.
//   - In expected output, `…` inside a line matches any text, and a line that is only `…` matches any
//     number of lines. Times (2026-12-02T14:28:02.270164000Z, 2026-12-02 14:28:02, and the exporter's
//     Unix times: `…_timestamp_seconds{…} 1796221466.553986`) compare as equal to any time, and the
//     database's name as `kandev`.
//   - `<!-- before: subagent-context ARGS -->` just above a block runs that first, silently (exit 0).
import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { readDoc } from '../helpers/doc-blocks.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { planTraffic } from '../../kandev/traffic-plan.js';
import { writeHistory } from '../../kandev/traffic-write.js';

interface Session { before: string[][]; steps: Array<{ args: string[]; expected: string }>; line: number }

/** A doc's console blocks, in order. */
export function consoleSessions(text: string): Session[] {
  const sessions: Session[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```console') continue;
    const before: string[][] = [];
    for (let j = i - 1; j >= 0 && /^<!-- before: .* -->$/.test(lines[j]!); j--) {
      before.unshift(words(/^<!-- before: subagent-context (.*) -->$/.exec(lines[j]!)?.[1] ?? ''));
    }
    const session: Session = { before, steps: [], line: i + 1 };
    for (i++; lines[i] !== '```'; i++) {
      const command = /^\$ subagent-context(?: (.*))?$/.exec(lines[i]!);
      if (command) session.steps.push({ args: words(command[1] ?? ''), expected: '' });
      else if (lines[i]!.startsWith('$ ')) throw new Error(`line ${i + 1}: only subagent-context commands are run: ${lines[i]}`);
      else if (session.steps.length) session.steps.at(-1)!.expected += `${lines[i]}\n`;
    }
    sessions.push(session);
  }
  return sessions;
}

/** Shell-like words: spaces split, single or double quotes group. */
function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
}

const TIME = /\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?Z?\b/g;
const UNIX_TIME = /(_timestamp_seconds\{[^}]*\} )\d+(?:\.\d+)?$/gm;

/** Whether `actual` is what `expected` shows, with times, the database name and `…` as described above. */
export function matchesDoc(actual: string, expected: string, database: string): boolean {
  const norm = (s: string) => s.replace(TIME, '<time>').replace(UNIX_TIME, '$1<time>').replaceAll(database, 'kandev')
    .split('\n').map((l) => l.trimEnd());
  const want = norm(expected.trimEnd());
  const got = norm(actual.trimEnd());
  const lineRe = (l: string) => new RegExp(`^${l.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
  const match = (w: number, g: number): boolean => {
    if (w === want.length) return g === got.length;
    if (want[w] === '…') {
      for (let k = g; k <= got.length; k++) if (match(w + 1, k)) return true;
      return false;
    }
    return g < got.length && lineRe(want[w]!).test(got[g]!) && match(w + 1, g + 1);
  };
  return match(0, 0);
}

const DOCS = [...readdirSync(join(PACKAGE_ROOT, 'docs')).filter((f) => f.endsWith('.md')), 'README.md']
  .map((doc) => ({ doc, sessions: consoleSessions(readDoc(doc)) }))
  .filter((d) => d.sessions.length > 0);
const cli = builtCli();

describe('the helpers read a doc the way a reader does', () => {
  it('match times, the database name and … as documented, and nothing more', () => {
    expect(matchesDoc('at 2026-12-04T17:01:02.123456000Z in db_x\n', 'at 2026-01-01T00:00:00Z in kandev\n', 'db_x')).toBe(true);
    expect(matchesDoc('a\nb\nc\nd\n', 'a\n…\nd\n', 'x')).toBe(true);
    expect(matchesDoc('rows 87 of 90\n', 'rows … of 90\n', 'x')).toBe(true);
    expect(matchesDoc('rows 86\n', 'rows 87\n', 'x')).toBe(false);
    expect(matchesDoc('a_timestamp_seconds{schema="x"} 1796565567.917834\n', 'a_timestamp_seconds{schema="x"} 1796221466.553986\n', 'x')).toBe(true);
    expect(matchesDoc('a_total{schema="x"} 1796565567\n', 'a_total{schema="x"} 1796221466\n', 'x')).toBe(false);
    expect(matchesDoc('a\nb\n', 'a\n', 'x')).toBe(false);
  });

  it('find every console block of the docs (some exist)', () => {
    expect(DOCS.map((d) => d.doc)).toEqual(expect.arrayContaining(['install.md', 'uninstall.md']));
  });
});

for (const { doc, sessions } of DOCS) {
  describe(`${doc}: its console blocks print what they show`, async () => {
    const db = await freshDatabase(`doc_${doc.replace(/\.md$/, '')}`, { from: 'host' });
    const client = await db.connect();
    await writeHistory(client, 'public', planTraffic({ invalidJson: false }));
    const env = { DATABASE_URL: db.url };
    const withUrl = (args: string[]) => args.map((a) => (a === 'postgres://USER@HOST/kandev' ? db.url : a));

    for (const session of sessions) {
      it(`the block at line ${session.line}: ${session.steps.map((s) => `subagent-context ${s.args.join(' ')}`).join('; ')}`, async () => {
        for (const args of session.before) {
          const r = await runCli(cli, withUrl(args), env);
          expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
        }
        for (const step of session.steps) {
          const r = await runCli(cli, withUrl(step.args), env);
          const printed = r.stdout + r.stderr + (r.code ? `[exit ${r.code}]\n` : '');
          expect(matchesDoc(printed, step.expected, db.name),
            `${doc}:${session.line} subagent-context ${step.args.join(' ')}\n--- the doc shows:\n${step.expected}--- it printed:\n${printed}`)
            .toBe(true);
        }
      });
    }
  });
}
