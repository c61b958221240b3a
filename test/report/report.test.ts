// `subagent-context report`: every number of a hand-counted history (test/helpers/report-fixture.ts),
// through the built CLI, with unknown (not reported) usage kept apart from zero; the window
// (--since/--until) applied alike to the terminal, --json and --html; the terminal report fitted to
// its width.
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { seedReportFixture, expectedReport, TASK_B_TITLE } from '../helpers/report-fixture.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const db = await freshDatabase('report');
const seeded = await seedReportFixture(db);
await db.createHost('empty_host');
await db.up('empty_host');
const cli = builtCli();
const env = { DATABASE_URL: db.url, COLUMNS: undefined };
const json = async (...args: string[]) => {
  const r = await runCli(cli, ['report', '--json', ...args], env);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout);
};
const widest = (text: string) => Math.max(...text.split('\n').map((l) => [...l].length));

describe('report --json', () => {
  it('gives every panel of the hand-counted history exactly', async () => {
    const report = await json();
    const { health, stats, unavailable, database, window, running, ...panels } = report;
    expect(panels).toEqual(expectedReport());
    expect(unavailable).toEqual({});  // every panel answers on a plain server (Citus leaves nesting out)
    expect(database).toEqual({ host: '127.0.0.1', database: new URL(db.url).pathname.slice(1), schema: 'public', server_port: Number(new URL(db.url).port) });
    expect(window).toMatchObject({ since: null, until: null, first_observed: '2026-08-12T09:00:00Z', last_observed: '2099-01-01T00:00:09Z' });
    // Still running: x4 (background, launched at :05) and z1 (:06), oldest first. The fixture's times
    // lie in 2099, ahead of the server's clock: the age is negative, shown as "in the future".
    expect(running.map((x: { tool_call_id: string; async: boolean; title: string }) => [x.tool_call_id, x.async, x.title]))
      .toEqual([['x4', true, 'task-a1t1'], ['z1', false, TASK_B_TITLE]]);
    expect(running[0].age_seconds).toBeLessThan(0);
    expect(health).toMatchObject({ activated: true, shortfall: 0, excess: 0, trigger_enabled: true, failures: 0,
      collisions: 0, last_observed_at: '2099-01-01T00:00:09.000000Z', backfill_through: '2026-08-12T09:00:00.000000000Z' });
    // Twelve qualifying writes after installation (seven inserts, five updates); the backfill is not counted.
    expect(seeded.liveQualifyingWrites).toBe(12);
    expect(stats).toEqual({ attempted: 12, skipped_no_identity: 0, persisted: 12, failed: 0, anomalous_value: 0, unknown_execution: 12 });
  });

  it('reports unknown as null and empty histograms on an installed database without subagents', async () => {
    const report = await json('--schema', 'empty_host');
    expect(report.overview).toEqual({ subagents: 0, live: 0, backfill: 0, sessions: 0, turns: 0, usage_reported: 0,
      usage_not_reported: 0, subagent_type_missing: 0, total_tokens: null, max_tokens: null, unknown_execution: 0 });
    expect(report.fanout_per_turn).toEqual([]);
    expect(report.by_model).toEqual([]);
    expect(report.nesting).toEqual([]);
    expect(report.trend_per_day).toEqual([]);
    expect(report.running).toEqual([]);
    expect(report.top_cards).toEqual({ by_subagents: [], by_tokens: [] });
    expect(report.sessions_and_cards).toEqual({ cards: 0, sessions: 0, subagents: 0, sessions_with_subagents: 0,
      sessions_per_card: null, subagents_per_session: null, subagents_per_card: null, contexts_per_card: null,
      most_subagents_in_one_session: 0 });
    expect(report.settlement).toEqual({ settled: 0, settled_sync: 0, settled_async: 0, outstanding: 0, outstanding_async: 0,
      oldest_outstanding_since: null, median_seconds_to_settle_sync: null, median_reported_run_seconds: null, run_time_reported: 0 });
    expect(report.health.last_observed_at).toBeNull();
  });

  it('shows cards by id, and says so, on a host whose tasks table has no title', async () => {
    await db.createHost('untitled');
    await seedReportFixture(db, 'untitled');
    await db.query('ALTER TABLE untitled.tasks DROP COLUMN title');
    const report = await json('--schema', 'untitled');
    expect(report.top_cards.by_subagents.map((c: { id: string; title: string | null }) => [c.id, c.title])).toEqual([['task-a1t1', null], ['task-b', null]]);
    expect(report.unavailable.titles).toBe('the host has no "untitled".tasks.title column, so cards are shown by their id.');
    const text = await runCli(cli, ['report', '--schema', 'untitled'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^ {2}task-b +3 +0 +500 +2$/m);
  });
});

describe('report --since / --until', () => {
  // Observed (created) at: y1 2026-08-12 09:00 (history); x1 :01, x2 :02, x3 :03, x4 :05, z1 :06, z2 :08, w1 :09 on 2099-01-01.
  it('windows the terminal report, --json and --html alike', async () => {
    const window = ['--since', '2099-01-01T00:00:05Z', '--until', '2099-01-01T00:00:08'];
    const report = await json(...window);  // x4 and z1
    expect(report.overview).toMatchObject({ subagents: 2, live: 2, backfill: 0, sessions: 2, turns: 2 });
    expect(report.window).toMatchObject({ since: '2099-01-01T00:00:05Z', until: '2099-01-01T00:00:08Z',
      first_observed: '2099-01-01T00:00:05Z', last_observed: '2099-01-01T00:00:06Z' });
    expect(report.by_subagent_type.map((t: { subagent_type: string; subagents: number }) => [t.subagent_type, t.subagents]))
      .toEqual([['Explore', 1], ['general', 1]]);
    expect(report.nesting).toEqual([{ depth: 0, subagents: 1 }, { depth: 2, subagents: 1 }]);  // z1; x4 (its parents, before the window, count)
    // Sessions: the two that launched a subagent in the window (none of the fixture's sessions started in it).
    expect(report.sessions_and_cards).toMatchObject({ sessions: 2, cards: 2, subagents: 2 });

    const text = await runCli(cli, ['report', ...window], env);
    expect(text.stdout).toContain('2 subagents (2 live, 0 backfilled) in 2 turns of 2 sessions.');
    expect(text.stdout).toContain('window 2099-01-01T00:00:05Z to 2099-01-01T00:00:08Z (until exclusive)');

    const dir = mkdtempSync(join(tmpdir(), 'subagent-context-window-'));
    try {
      const file = join(dir, 'r.html');
      expect((await runCli(cli, ['report', ...window, '--html', file], env)).code).toBe(0);
      const html = readFileSync(file, 'utf8');
      expect(html).toMatch(/<th>subagents<\/th><td class="num" data-key="subagents">2<\/td>/);
      // Each timestamp is kept on one line in its own span: read the text without the markup.
      expect(html.replace(/<[^>]+>/g, '')).toContain('window 2099-01-01T00:00:05Z to 2099-01-01T00:00:08Z');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a date alone: --since is that midnight, --until includes that whole day', async () => {
    expect((await json('--since', '2026-08-13')).overview).toMatchObject({ subagents: 7, backfill: 0 });
    expect((await json('--until', '2026-08-12')).overview).toMatchObject({ subagents: 1, backfill: 1 });
    expect((await json('--until', '2026-08-11')).overview).toMatchObject({ subagents: 0 });
  });

  it('a time ago (7d, 12h) counts back from now', async () => {
    // now is before 2099 and months after 2026-08-12: the seven live ones, not the backfilled one.
    expect((await json('--since', '7d')).overview).toMatchObject({ subagents: 7, backfill: 0 });
    expect((await json('--until', '12h')).overview).toMatchObject({ subagents: 1, backfill: 1 });
  });

  it('the edges PostgreSQL holds: --until 9999-12-31, --since 0001-01-01, --since now, a time ago written -3d', async () => {
    const all = await runCli(cli, ['report', '--json', '--since', '0001-01-01', '--until', '9999-12-31'], env);
    expect(all.stderr).toBe('');
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout).window).toMatchObject({ since: '0001-01-01T00:00:00Z', until: '10000-01-01T00:00:00Z' });
    expect(JSON.parse(all.stdout).overview).toMatchObject({ subagents: 8 });
    for (const format of [['--width', '100'], ['--html', join(tmpdir(), `sc-edges-${process.pid}.html`)]]) {
      const r = await runCli(cli, ['report', '--until', '9999-12-31', ...format], env);
      expect(r.stderr.replace(/^wrote the HTML report to .*\n$/, '')).toBe('');
      expect(r.code).toBe(0);
    }
    rmSync(join(tmpdir(), `sc-edges-${process.pid}.html`), { force: true });
    // A time ago with a minus, as `date -d -3days` takes it, is the same as without; "now" is documented.
    expect((await json('--since', '-7d')).overview).toMatchObject({ subagents: 7, backfill: 0 });
    expect((await json('--until', '-12h')).overview).toMatchObject({ subagents: 1, backfill: 1 });
    expect((await json('--until', 'now')).overview).toMatchObject({ subagents: 1, backfill: 1 });
  });

  it('speaks of one turn of one session in the singular', async () => {
    const text = await runCli(cli, ['report', '--since', '2099-01-01T00:00:09Z', '--width', '1000'], env);
    expect(text.stdout).toContain('1 subagent (1 live, 0 backfilled) in 1 turn of 1 session. Usage was reported by 1 subagent and not by 0.');
    expect(text.stdout).toContain('Reported tokens: 500 in total, 500 the most for one subagent.');
  });

  it.each([
    [['--since', 'yesterday'], /^error: --since must be a date from 0001-01-01 to 9999-12-31 \(2026-08-01\), a date and time in UTC .*, now, or a time ago like 30m, 12h, 7d or 2w; got "yesterday"\.$/],
    // Year 0 is no year to PostgreSQL, and 999,999 weeks ago is before the earliest time it holds.
    [['--since', '0000-12-31'], /^error: --since must be a date from 0001-01-01 to 9999-12-31 .*; got "0000-12-31"\.$/],
    [['--since', '999999w'], /^error: --since 999999w reaches back before 4713 BC, the earliest time PostgreSQL holds: give a shorter time ago, or a date\.$/],
    [['--until', '2026-02-30'], /^error: --until must be a date .*; got "2026-02-30"\.$/],
    [['--since', '2026-08-01T25:00'], /^error: --since must be a date .*; got "2026-08-01T25:00"\.$/],
    [['--since', '2099-01-02', '--until', '2099-01-01'], /^error: --since \(2099-01-02 00:00:00\.000 UTC\) must be before --until \(2099-01-02 00:00:00\.000 UTC\): nothing lies between them\.$/],
    [['--width', '20'], /^error: --width must be a whole number of columns from 40 to 1000, got "20"\.$/],
  ])('%j is one sentence on stderr, exit 3', async (args, message) => {
    const r = await runCli(cli, ['report', ...args], env);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toMatch(message);
  });
});

describe('report (terminal)', () => {
  it('draws the fan-out histogram, the per-card figures and keeps unknown apart from 0', async () => {
    const r = await runCli(cli, ['report', '--width', '160'], env);
    expect(r.code).toBe(0);
    const out = r.stdout;
    expect(out).not.toMatch(/\x1b\[/); // NO_COLOR (set by the helper) and not a terminal
    // Bars scale to the largest count (2 turns = 40 blocks at 80 columns, 80 at 160).
    expect(out).toMatch(/^ {3}1 subagent │█{80} 2$/m);
    expect(out).toMatch(/^ {2}2 subagents │█{40} 1$/m);
    expect(out).toMatch(/sessions per card \(what kandev shows\) +1\.33$/m);
    expect(out).toMatch(/subagents per card +2\.67$/m);
    expect(out).toMatch(/model contexts per card \(sessions \+ subagents\) +4\.00$/m);
    // general reported nothing: every usage column says unknown; Explore's zero tool uses stay 0.0.
    expect(out).toMatch(/^ {2}general +2 +0 +0 +2 +unknown +unknown +unknown +unknown +unknown +unknown$/m);
    expect(out).toMatch(/^ {2}Explore +5 +3 +2 +3 +1,500 +750 +1,000 +2\.0 s +2\.0 s +0\.0$/m);
    expect(out).toMatch(/^ {2}m2 +1 +0 +1 +0 +500 +500 +500 +unknown +unknown +0\.0$/m);
    expect(out).toMatch(/^ {2}nested, depth 2 +1$/m);
    expect(out).toMatch(/^ {2}parent not captured +1$/m);
    expect(out).toMatch(/^ {2}still running, background +1$/m);
    expect(out).toMatch(/^ {2}median run time, synchronous \(launch to result\) +9\.0 s$/m);
    expect(out).toMatch(/^ {2}median run time reported by the agent \(2 subagents\) +3\.0 s$/m);
    expect(out).not.toContain('median time to settle');
    // The top cards with their titles, in full at 160 columns.
    expect(out).toMatch(new RegExp(`^  ${TASK_B_TITLE} +3 +0 +500 +2$`, 'm'));
    expect(out).toMatch(/^ {2}session-a2 \(task-a1t1\) +1 +0 +3,000 +0$/m);
    expect(out).toMatch(/^ {2}task-a1t1 \/ session-a1t1 +in the future +2099-01-01T00:00:05Z +Explore +\(not reported\) +yes$/m);
    expect(out).toMatch(/^ {2}2099-01-01 │█+ 7 \(3 async, 1,500 tokens\)$/m);
  });

  it('fits 80 columns: fewer usage columns, titles clipped, nothing wraps', async () => {
    const r = await runCli(cli, ['report', '--width', '80'], env);
    expect(r.code).toBe(0);
    expect(widest(r.stdout)).toBeLessThanOrEqual(80);
    expect(r.stdout).toMatch(/^ {3}1 subagent │█{40} 2$/m);
    // The usage tables keep count, async, not reported, tokens and average duration; the rest is named.
    expect(r.stdout).toMatch(/^ {2}Explore +5 +3 +3 +1,500 +2\.0 s$/m);
    expect(r.stdout).toContain('(not shown at 80 columns: usage reported, tokens (avg), tokens (max), duration');
    expect(r.stdout).toMatch(/^ {2}Migrate the billing pipeline to the n… +3 +0 +500 +2$/m);
    // At 160 every column is there, and the lines do use the room.
    const wide = await runCli(cli, ['report', '--width', '160'], env);
    expect(widest(wide.stdout)).toBeLessThanOrEqual(160);
    expect(widest(wide.stdout)).toBeGreaterThan(120);
    expect(wide.stdout).not.toContain('not shown at');
    expect(wide.stdout).toMatch(/^ {2}subagent_type .*tool uses \(avg\)$/m);
  });

  it('takes its width from --width, else the terminal, else $COLUMNS, else 80', async () => {
    const c = await runCli(cli, ['report'], { ...env, COLUMNS: '100' });
    expect(widest(c.stdout)).toBeLessThanOrEqual(100);
    expect(widest(c.stdout)).toBeGreaterThan(80);
    const d = await runCli(cli, ['report'], env);
    expect(widest(d.stdout)).toBeLessThanOrEqual(80);
    expect(d.stdout).toBe((await runCli(cli, ['report', '--width', '80'], env)).stdout.replace(/generated \S+/, d.stdout.match(/generated \S+/)![0]));
    if (existsSync('/usr/bin/script')) {
      // On a pseudo-terminal of 120 columns (stty sets its size), the terminal's width wins over $COLUMNS.
      const command = `stty cols 120; ${process.execPath} ${cli} report`;
      const out = execFileSync('/usr/bin/script', ['-qfec', command, '/dev/null'],
        { cwd: PACKAGE_ROOT, env: { ...process.env, DATABASE_URL: db.url, NO_COLOR: '1', COLUMNS: '60' }, encoding: 'utf8' });
      const lines = out.replaceAll('\r', '');
      expect(widest(lines)).toBeLessThanOrEqual(120);
      expect(widest(lines)).toBeGreaterThan(100);
    }
  });

  it('--help explains the command with examples', async () => {
    const r = await runCli(cli, ['report', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('subagent-context report --html fanout.html');
    expect(r.stdout).toContain('subagent-context report --since 7d');
    expect(r.stdout).toContain('never as 0');
  });

  it('--html with an unwritable path is one clear error, exit 3', async () => {
    const r = await runCli(cli, ['report', '--html', '/nonexistent-dir/r.html'], env);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toMatch(/^error: cannot write the HTML report to \/nonexistent-dir\/r\.html: .*Pass a writable path to --html\.$/);
  });
});
