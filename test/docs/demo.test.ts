// `subagent-context demo` (what `npm start` runs), through the built CLI: the whole product on a
// throwaway embedded PostgreSQL, with the measured traffic shape of README.md. --keep leaves the database
// up for other commands; Ctrl-C then stops it and nothing is left running.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { builtCli, runCli, startCli } from '../helpers/cli.js';
import { planTraffic, SHAPE } from '../../kandev/traffic-plan.js';
import { namedExecutionWrites } from '../../kandev/traffic-write.js';
import type { Report } from '../../src/report/index.js';

/** The one JSON object `demo --json` prints (the parts this test reads). */
interface DemoResult { database_url: string; install: { backfill: unknown }; health: unknown; stats: unknown; report: Report }

const cli = builtCli();
const children: ChildProcess[] = [];
afterAll(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGINT'); });

describe('planTraffic', () => {
  it('is the measured shape of README.md, deterministically', () => {
    const plan = planTraffic();
    expect(plan).toEqual(planTraffic());
    const subagents = plan.sessions.flatMap((s) => s.turns.flatMap((t) => t.subagents));
    expect(subagents).toHaveLength(253);
    // 38 sessions, one per card, plus an abandoned session of a card that kandev deletes.
    expect(plan.sessions.filter((s) => !s.abandoned)).toHaveLength(38);
    expect(new Set(plan.sessions.map((s) => s.task)).size).toBe(38);
    const byStatus: Record<string, number> = {};
    for (const a of subagents) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;
    expect(byStatus).toEqual(SHAPE.status);
    expect(subagents.filter((a) => a.model !== null)).toHaveLength(49);
    expect(subagents.filter((a) => a.subagentType === null)).toHaveLength(3);
    expect(subagents.filter((a) => a.parentToolCallId !== null)).toHaveLength(1);
    expect(Math.max(...subagents.map((a) => a.totalTokens ?? 0))).toBe(275_717);
    // 372 qualifying writes: every subagent frame of the live sessions plus the bulk completion that
    // closes the one subagent that never reports a status.
    expect(plan.totals.live).toEqual({ attempted: 372, skipped_no_identity: 1, anomalous_value: 2, persisted: 371, subagents: 166 });
    // The mix around them (docs/integration.md): subagent frames are a small share of all writes.
    expect(plan.totals.byClass.subagent / plan.totals.writes).toBeLessThan(0.15);
    for (const k of ['text', 'prompt', 'tool', 'permission', 'bulk', 'delete'] as const) expect(plan.totals.byClass[k]).toBeGreaterThan(0);
    expect(planTraffic({ scale: 3 }).totals.subagents).toBe(3 * 253);
  });
});

// Each demo starts its own embedded server on a free port: the cases run side by side. A demo is
// CPU-bound work (initdb, a history, a backfill, a replay from several writers): on a machine shared
// with other work it takes as long as the CPU it gets, so nothing here is timed. Each case waits for
// the demo's own signs (its JSON, its "press Ctrl-C", its exit); DEMO_HANG only ends a demo that hangs.
// (On 4259581 the suite's 60 s default was the demo's budget, and a loaded machine ran out of it.)
const DEMO_HANG = 600_000;

describe.concurrent('demo', () => {
  it('--json --keep: installs, backfills, replays, reports the measured shape; other commands use the kept database; Ctrl-C stops it', async () => {
    const { child, exited, value: result, stderr } = await startCli(cli, ['demo', '--json', '--keep', '--writers', '3'], {}, (out): DemoResult | undefined => {
      try { return JSON.parse(out); } catch { return undefined; /* not complete yet */ }
    }, children);
    await new Promise<void>((resolve) => {
      const check = () => (stderr().includes('press Ctrl-C') ? resolve() : setTimeout(check, 50));
      check();
    });
    const err = stderr();
    const url: string = result.database_url;
    expect(url).toMatch(/^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/postgres$/);
    expect(err).toContain(`database left running: ${url}`);

    const plan = planTraffic({ invalidJson: false });
    expect(result.install.backfill).toMatchObject({ status: 'activated', inserted: plan.totals.history.subagents });
    expect(result.health).toMatchObject({ status: 'healthy', activated: true, shortfall: 0, excess: 0, trigger_enabled: true, failures: 0, collisions: 0 });
    expect(result.stats).toEqual({ ...plan.totals.live, subagents: undefined, failed: 0,
      unknown_execution: plan.totals.live.persisted - namedExecutionWrites(plan, 3) });

    const r = result.report;
    expect(r.fanout_per_turn).toEqual([{ fanout: 1, turns: 65 }, { fanout: 2, turns: 12 }, { fanout: 3, turns: 42 },
      { fanout: 4, turns: 5 }, { fanout: 5, turns: 2 }, { fanout: 8, turns: 1 }]);
    expect(r.agent_status).toEqual([
      { agent_status: 'async_launched', subagents: 190, usage_reported: 0, model_reported: 0 },
      { agent_status: 'completed', subagents: 57, usage_reported: 57, model_reported: 49 },
      { agent_status: 'started', subagents: 5, usage_reported: 0, model_reported: 0 },
      { agent_status: '(absent)', subagents: 1, usage_reported: 0, model_reported: 0 },
    ]);
    expect(r.nesting).toEqual([{ depth: 0, subagents: 252 }, { depth: 1, subagents: 1 }]);
    expect(r.overview).toMatchObject({ subagents: 253, live: 166, backfill: 87, sessions: 38, turns: 127,
      usage_reported: 57, usage_not_reported: 196, subagent_type_missing: 3, max_tokens: 275_717 });
    expect(r.sessions_and_cards).toMatchObject({ cards: 38, sessions: 38, sessions_per_card: 1, subagents_per_card: 6.66, contexts_per_card: 7.66 });
    expect(r.settlement).toMatchObject({ settled: 248, outstanding: 5, outstanding_async: 0 });
    expect(r.by_model[0]).toMatchObject({ model: '(not reported)', subagents: 204, usage_not_reported: 196 });

    // The kept database answers the other commands.
    const report = await runCli(cli, ['report', '--json', '--database-url', url]);
    expect(report.code).toBe(0);
    expect(JSON.parse(report.stdout).fanout_per_turn).toEqual(r.fanout_per_turn);
    const health = await runCli(cli, ['health', '--json', '--database-url', url]);
    expect(health.code).toBe(0);

    child.kill('SIGINT');
    expect(await exited).toBe(0);
    const c = new pg.Client(url);
    c.on('error', () => {});
    await expect(c.connect()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  }, DEMO_HANG);

  it('prints progress, health and the report as text, and leaves nothing running (on kandev after 0.91)', async () => {
    const r = await runCli(cli, ['demo', '--writers', '2', '--kandev', '0.92']);
    expect(r.code, r.stderr).toBe(0);
    for (const step of ['starting an embedded PostgreSQL', "creating kandev's tables and a history that predates installation",
      'installing capture and backfilling history (subagent-context up)', 'replaying live traffic from 2 concurrent writers']) {
      // A step's time is 12.3s, or 1m47s past a minute (src/progress.ts): how long it took is not the point.
      expect(r.stderr).toMatch(new RegExp(`^✓ ${step.replace(/[()]/g, '\\$&')} \\((\\d+\\.\\d|\\d+m\\d\\d)s\\)`, 'm'));
    }
    expect(r.stdout).toMatch(/^health: healthy$/m);
    expect(r.stdout).toMatch(/^ {2}stats +attempted 372, persisted 371, skipped \(no identity\) 1, failed 0, anomalous 2, unknown execution \d+$/m);
    expect(r.stdout).toMatch(/^ {3}1 subagent │█{40} 65$/m);
    expect(r.stdout).toMatch(/^ {2}8 subagents │█ 1$/m);
    expect(r.stdout).toMatch(/sessions per card \(what kandev shows\) +1\.00$/m);
    expect(r.stdout).toMatch(/^ {2}nested, depth 1 +1$/m);
    expect(r.stdout).toMatch(/^demo finished in \d+(\.\d)?s$/m);
    expect(r.stdout).not.toContain('database left running');
    // docs/demo.md's output block is what the demo prints, numbers aside: each of its lines, in order.
    const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'demo.md'), 'utf8');
    const block = /^```\n(✓ starting[\s\S]*?)^```$/m.exec(doc)?.[1];
    expect(block, 'docs/demo.md shows the demo output').toBeDefined();
    // A number, with its separators, is any number; what lies between numbers (a host's port, a time's
    // colons) is compared; a step's time past a minute (1m47s) is a time like any other.
    const shape = (line: string) => line.replace(/\(\d+m\d\ds\)/g, '(0.0s)').replace(/\d[\d,.]*/g, '#').trimEnd();
    const printed = (r.stderr + r.stdout).split('\n').map(shape);
    let at = 0;
    for (const line of block!.split('\n').filter((l) => l !== '…' && l !== '').map(shape)) {
      const found = printed.indexOf(line, at);
      expect(found, `docs/demo.md line "${line}" is printed (after line ${at})`).toBeGreaterThanOrEqual(0);
      at = found + 1;
    }
    // The server it announced is gone.
    const host = r.stderr.match(/starting an embedded PostgreSQL \(\d+\.\ds\): (127\.0\.0\.1:\d+)/)![1];
    const c = new pg.Client(`postgres://postgres:x@${host}/postgres`);
    c.on('error', () => {});
    await expect(c.connect()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  }, DEMO_HANG);

  it('refuses a bad --writers with one sentence and exit 3, before starting anything', async () => {
    const r = await runCli(cli, ['demo', '--writers', 'many']);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: --writers must be a whole number from 1 to 1000, got "many".');
  }, DEMO_HANG);
});
