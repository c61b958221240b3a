// `subagent-context report`: every number of a hand-counted history (test/helpers/report-fixture.ts),
// through the built CLI, with unknown (not reported) usage kept apart from zero.
import { describe, it, expect } from 'vitest';
import { freshDatabase } from './helpers/database.js';
import { builtCli, runCli } from './helpers/cli.js';
import { seedReportFixture, expectedReport } from './helpers/report-fixture.js';

const db = await freshDatabase('report');
const seeded = await seedReportFixture(db);
await db.createHost('empty_host');
await db.up('empty_host');
const cli = builtCli();
const env = { DATABASE_URL: db.url };

describe('report --json', () => {
  it('gives every panel of the hand-counted history exactly', async () => {
    const r = await runCli(cli, ['report', '--json'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    const { health, stats, unavailable, ...panels } = report;
    expect(panels).toEqual(expectedReport());
    expect(unavailable).toEqual({});  // every panel answers on a plain server (Citus leaves nesting out)
    expect(health).toMatchObject({ activated: true, shortfall: 0, excess: 0, trigger_enabled: true, failures: 0,
      collisions: 0, last_observed_at: '2099-01-01T00:00:09.000000Z', backfill_through: '2026-08-12T09:00:00.000000000Z' });
    // Twelve qualifying writes after installation (seven inserts, five updates); the backfill is not counted.
    expect(seeded.liveQualifyingWrites).toBe(12);
    expect(stats).toEqual({ attempted: 12, skipped_no_identity: 0, persisted: 12, failed: 0, anomalous_value: 0, unknown_execution: 12 });
  });

  it('reports unknown as null and empty histograms on an installed database without subagents', async () => {
    const r = await runCli(cli, ['report', '--json', '--schema', 'empty_host'], env);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.overview).toEqual({ subagents: 0, live: 0, backfill: 0, sessions: 0, turns: 0, usage_reported: 0,
      usage_not_reported: 0, subagent_type_missing: 0, total_tokens: null, max_tokens: null, unknown_execution: 0 });
    expect(report.fanout_per_turn).toEqual([]);
    expect(report.by_model).toEqual([]);
    expect(report.nesting).toEqual([]);
    expect(report.sessions_and_cards).toEqual({ cards: 0, sessions: 0, subagents: 0, sessions_with_subagents: 0,
      sessions_per_card: null, subagents_per_session: null, subagents_per_card: null, contexts_per_card: null,
      most_subagents_in_one_session: 0 });
    expect(report.settlement).toEqual({ settled: 0, outstanding: 0, outstanding_async: 0, oldest_outstanding_since: null, median_seconds_to_settle: null });
    expect(report.health.last_observed_at).toBeNull();
  });
});

describe('report (terminal)', () => {
  it('draws the fan-out histogram, the per-card figures and keeps unknown apart from 0', async () => {
    const r = await runCli(cli, ['report'], env);
    expect(r.code).toBe(0);
    const out = r.stdout;
    expect(out).not.toMatch(/\x1b\[/); // NO_COLOR (set by the helper) and not a terminal
    // Bars scale to the largest count (2 turns = 40 blocks).
    expect(out).toMatch(/^ {3}1 subagent │█{40} 2$/m);
    expect(out).toMatch(/^ {2}2 subagents │█{20} 1$/m);
    expect(out).toMatch(/^ {2}4 subagents │█{20} 1$/m);
    expect(out).toMatch(/sessions per card {3}\(what kandev shows\) +1\.33$/m);
    expect(out).toMatch(/subagents per card +2\.67$/m);
    expect(out).toMatch(/model contexts per card \(sessions \+ subagents\) +4\.00$/m);
    // general reported nothing: every usage column says unknown; Explore's zero tool uses stay 0.0.
    expect(out).toMatch(/^ {2}general +2 +0 +0 +2 +unknown +unknown +unknown +unknown +unknown +unknown$/m);
    expect(out).toMatch(/^ {2}Explore +5 +3 +2 +3 +1,500 +750 +1,000 +2\.0 s +2\.0 s +0\.0$/m);
    expect(out).toMatch(/^ {2}m2 +1 +0 +1 +0 +500 +500 +500 +unknown +unknown +0\.0$/m);
    expect(out).toMatch(/^ {2}nested, depth 2 +1$/m);
    expect(out).toMatch(/^ {2}parent not captured +1$/m);
    expect(out).toMatch(/^ {2}outstanding async +1$/m);
    expect(out).toContain('median time to settle 7.0 s; oldest outstanding since 2099-01-01T00:00:05Z');
  });

  it('--help explains the command with examples', async () => {
    const r = await runCli(cli, ['report', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('subagent-context report --html fanout.html');
    expect(r.stdout).toContain('never as 0');
  });

  it('--html with an unwritable path is one clear error, exit 3', async () => {
    const r = await runCli(cli, ['report', '--html', '/nonexistent-dir/r.html'], env);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toMatch(/^error: cannot write the HTML report to \/nonexistent-dir\/r\.html: .*Pass a writable path to --html\.$/);
  });
});
