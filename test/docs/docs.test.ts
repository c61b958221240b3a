// What the docs tell a newcomer to run, run as written: applying kandev's fixture by hand
// (docs/demo.md), and the size of the suite that docs/compatibility.md reports.
import { describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import config from '../../vitest.config.js';
import { blocksUnder } from '../helpers/doc-blocks.js';
import { goMarshal } from '../../kandev/gojson.js';
import { planTraffic } from '../../kandev/traffic-plan.js';
import { createTurn, insertMessage } from '../../kandev/host.js';

const read = (doc: string) => readFileSync(join(PACKAGE_ROOT, 'docs', doc), 'utf8');
const scratch = await freshDatabase('docs_fixture'); // empty: no host tables
const messageDb = await freshDatabase('docs_message', { from: 'installed' });
const psql = ['/usr/bin/psql', '/usr/local/bin/psql'].find(existsSync);

describe('docs/demo.md: kandev\'s tables by hand', () => {
  it.skipIf(!psql)('the sed | psql line creates the tables, and up installs on them', async () => {
    const line = /^(sed 's\/@extschema@\/public\/g' kandev\/schema\/\S+ \| psql "\$DATABASE_URL" [^\n]*)$/m.exec(read('demo.md'))?.[1];
    expect(line, 'docs/demo.md shows the fixture command').toBeDefined();
    const r = await new Promise<{ code: number; out: string }>((resolve) => execFile('bash', ['-euo', 'pipefail', '-c', line!],
      { cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: scratch.url } },
      (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: stdout + stderr })));
    expect(r.code, r.out).toBe(0);
    expect(r.out, 'psql -q prints nothing on success').toBe('');
    const tables = await scratch.query<{ t: string }>(
      `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`);
    expect(tables.rows.map((x) => x.t)).toEqual(['kandev_meta', 'task_session_messages', 'task_session_turns', 'task_sessions', 'tasks']);
    const cli = builtCli();
    const up = await runCli(cli, ['up'], { DATABASE_URL: scratch.url });
    expect(up.code, up.stderr).toBe(0);
    const health = await runCli(cli, ['health', '--json'], { DATABASE_URL: scratch.url });
    expect(health.code, health.stderr).toBe(0);
    expect(JSON.parse(health.stdout)).toMatchObject({ status: 'idle', activated: true });
  });
});

describe('docs/integration.md: a whole subagent message, as kandev writes it', () => {
  it('is one of the demo traffic\'s messages byte for byte once compacted, and capture derives the row the doc describes', async () => {
    const [block] = blocksUnder('integration.md', 'A subagent message, as kandev writes it');
    expect(block!.lang).toBe('json');
    const text = goMarshal(JSON.parse(block!.text));
    const write = planTraffic({ invalidJson: false }).sessions.flatMap((s) => s.turns.flatMap((t) => t.writes)).find((w) => 'metadata' in w && w.metadata === text);
    expect(write, 'the demo writes this exact metadata').toBeDefined();
    const db = messageDb;
    {
      const t = await createTurn(db.pool, 'public', 'docs');
      await insertMessage(db.pool, 'public', { id: 'doc-message', session: t.session, task: t.task, turn: t.turn, metadata: text });
      const { rows: [row] } = await db.query(`SELECT tool_call_id, parent_tool_call_id, subagent_type, description, agent_id, child_session_id,
          model, agent_status, tool_status, is_async, total_tokens::int, tool_use_count::int, duration_ms::int FROM task_session_subagents`);
      expect(row).toEqual('subagent' in write! ? write.subagent : undefined);
      const prose = read('integration.md');
      for (const fact of ['`subagent_type` `security-reviewer`', '`model` `claude-opus-5[1m]`', '`is_async` 0', '`total_tokens` 118541',
        '`tool_use_count` 12', '`duration_ms` 172762']) expect(prose.replace(/\s+/g, ' ')).toContain(fact);
    }
  });
});

describe('docs/compatibility.md', () => {
  it('reports as many test files as vitest runs (every file once, the host-facing ones again on kandev 0.91 and 0.92)', () => {
    const testFiles = (dir: string) => readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.test.ts'));
    const projects = (config.test?.projects ?? []) as Array<{ test: { name: string; include: string[] } }>;
    for (const name of ['kandev-0.91', 'kandev-0.92']) {
      expect(projects.find((p) => p.test.name === name)!.test.include).toEqual(['test/host/**/*.test.ts']);
    }
    const hostFacing = testFiles('test/host');
    expect(hostFacing.length).toBeGreaterThan(0);
    const runs = testFiles('test').length + 2 * hostFacing.length;
    const reported = [...read('compatibility.md').matchAll(/\| (\d+) files, (\d+) tests\b/g)];
    expect(reported.length, 'the results table has rows').toBeGreaterThan(0);
    for (const [row, files] of reported) expect(Number(files), row).toBe(runs);
  });
});

describe('README.md: the Layout section', () => {
  const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
  const layout = readme.slice(readme.indexOf('## Layout'));
  const bullets = [...layout.matchAll(/^- `([\w.-]+)\/`([\s\S]*?)(?=^- |$(?![\s\S]))/gm)].map((m) => ({ dir: m[1]!, text: m[2]! }));
  const filesUnder = (dir: string) => readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: 'utf8' });

  it('names every top-level folder of the tree', () => {
    const tracked = readdirSync(PACKAGE_ROOT, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'dist'].includes(e.name))
      .map((e) => e.name);
    expect(bullets.map((b) => b.dir).sort()).toEqual(expect.arrayContaining(tracked.sort()));
  });

  it('names only files and folders that exist where it says', () => {
    const named = bullets.flatMap(({ dir, text }) => [...text.matchAll(/`([\w./-]+\.(?:ts|js|sql)|[\w-]+\/)`/g)]
      .map((m) => ({ dir, name: m[1]!.replace(/\/$/, '') })));
    expect(named.length).toBeGreaterThan(20);
    for (const { dir, name } of named) {
      const there = existsSync(join(PACKAGE_ROOT, name)) || filesUnder(dir).some((f) => f === name || f.endsWith(`/${name}`));
      expect(there, `${dir}/ … ${name}`).toBe(true);
    }
  });
});

describe('CHANGELOG.md: releases that freeze', () => {
  const changelog = readFileSync(join(PACKAGE_ROOT, 'CHANGELOG.md'), 'utf8');
  const { version } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));
  const sections = [...changelog.matchAll(/^## (.+)$/gm)].map((m) => m[1]!);

  it("has a section for package.json's version, below a pending Unreleased one", () => {
    expect(sections[0]).toBe('Unreleased');
    expect(sections.some((s) => s.startsWith(`${version} (`)), `CHANGELOG.md has no "## ${version} (…)" section`).toBe(true);
  });

  it('names the commit of every release that was cut, as docs/upgrade.md does', () => {
    const upgrade = read('upgrade.md');
    for (const s of sections.slice(1)) {
      const [, v, state] = /^(\d+\.\d+\.\d+) \((.+)\)$/.exec(s) ?? [];
      expect(v, `"## ${s}" is "## <version> (<date>, commit <sha>)" or "(pending: not cut yet)"`).toBeDefined();
      if (state === 'pending: not cut yet') {
        expect(upgrade).toContain(`| ${v} | not cut yet |`);
        continue;
      }
      const commit = /^\d{4}-\d\d-\d\d, commit `([0-9a-f]{7,40})`$/.exec(state!)?.[1];
      expect(commit, `"## ${s}" names its commit`).toBeDefined();
      expect(upgrade).toContain(`| ${v} | \`${commit}\` |`);
    }
  });
});

/** The repository's files as a clone has them (git's index), without the dependencies or builds. */
const tracked = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: PACKAGE_ROOT, encoding: 'utf8' })
  .split('\0').filter((f) => f && existsSync(join(PACKAGE_ROOT, f)) && /\.(ts|js|mjs|sql|md|yml|json|sh)$|^\.ci\//.test(f));

describe('citations a user can follow', () => {
  it('no file cites the SPEC by section, a document users do not have: cite docs/ instead', () => {
    const citation = new RegExp('SPEC ' + '§');
    const found = tracked.flatMap((f) => readFileSync(join(PACKAGE_ROOT, f), 'utf8').split('\n')
      .flatMap((line, i) => (citation.test(line) ? [`${f}:${i + 1}`] : [])));
    expect(found).toEqual([]);
  });

  /** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
  const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
  /** A document's anchors: its headings' slugs, and the explicit `<a id="…">` GitHub renders too. */
  const anchors = (file: string) => {
    const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
    return new Set([...text.split('\n').filter((l) => /^#+ /.test(l)).map((l) => slug(l.replace(/^#+ /, ''))),
      ...[...text.matchAll(/<a id="([^"]+)"><\/a>/g)].map((m) => m[1])]);
  };

  it('every link to a doc, and every docs/….md#anchor a file cites, resolves', () => {
    const broken: string[] = [];
    const check = (from: string, base: string, target: string) => {
      const [path, anchor] = target.split('#');
      const file = path ? join(base, path) : join(PACKAGE_ROOT, from);
      if (!existsSync(file)) broken.push(`${from}: ${target} (no such file)`);
      else if (anchor && file.endsWith('.md') && !anchors(file).has(anchor)) broken.push(`${from}: ${target} (no such heading)`);
    };
    for (const f of tracked) {
      const text = readFileSync(join(PACKAGE_ROOT, f), 'utf8');
      if (f.endsWith('.md')) {
        for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
          if (!/^[a-z]+:/.test(target!)) check(f, dirname(join(PACKAGE_ROOT, f)), target!);
        }
      }
      // A source comment's citation of a doc (with or without its #anchor), from the repository's root.
      for (const [, target] of text.matchAll(/(?<![\w./])(docs\/[\w-]+\.md(?:#[\w-]+)?)/g)) {
        check(f, PACKAGE_ROOT, target!);
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('advice that is safe to follow', () => {
  it('no doc or --help says `health || repair`: || runs repair on exit 2 and 3 too (capture off, could not check)', () => {
    const unsafe = /health\b[^|\n`]*\|\|\s*(?:subagent-context\s+)?repair/;
    const found = tracked.filter((f) => /^(docs\/.*\.md|README\.md|src\/.*\.ts)$/.test(f))
      .flatMap((f) => readFileSync(join(PACKAGE_ROOT, f), 'utf8').split('\n')
        .flatMap((line, i) => (unsafe.test(line) ? [`${f}:${i + 1}`] : [])));
    expect(found).toEqual([]);
  });
});
