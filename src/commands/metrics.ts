import type { Command, CommandContext } from './types.js';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import pg from 'pg';
import { connect, explain, redact, UserError, assertSchemaExists } from '../db.js';
import { PACKAGE_VERSION, sqlFile } from '#sql';
import { safe } from '../output.js';
import { HEALTH_STATUSES } from '../status.js';

interface Sample { name: string; help: string; type: 'gauge' | 'counter'; value: number | null; labels?: Record<string, string> }

/** health's status values (docs/health.md), exported as a state set: one series per value, 1 for the current one. */
export const STATUS_VALUES = HEALTH_STATUSES;

// Label values are shown safe() first: `metrics --once` on a terminal must not pass control characters
// through (an installed_version or a schema name is text from the database). safe() writes them as
// \x1b, whose backslash the format's own escaping then doubles, so Prometheus reads the text "\x1b".
const labelValue = (v: string) => `"${safe(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/** Every metric `metrics` can export, in order, with its type and help (also what `metrics --help` lists). */
export const METRICS: Array<Omit<Sample, 'value' | 'labels'> & { column?: string }> = [
  { name: 'subagent_context_up', type: 'gauge', help: '1 when the database answered this scrape, else 0.' },
  { name: 'subagent_context_status', type: 'gauge', help: "Health's one verdict (subagent_context_health().status): 1 for the current value of the status label, 0 for the others." },
  { name: 'subagent_context_info', type: 'gauge', help: 'Always 1; the labels carry the installed release (installed_version) and the exporter\'s (package_version).' },
  { name: 'subagent_context_activated', type: 'gauge', help: '1 when the activation key capture_since is present.', column: 'activated' },
  { name: 'subagent_context_trigger_installed', type: 'gauge', help: '1 when the capture trigger exists on task_session_messages.', column: 'trigger_installed' },
  { name: 'subagent_context_trigger_enabled', type: 'gauge', help: '1 when the capture trigger fires in normal sessions (enabled ORIGIN or ALWAYS).', column: 'trigger_enabled' },
  { name: 'subagent_context_shortfall', type: 'gauge', help: 'Subagents written since activation that have no row: the only alarm. Absent before activation.', column: 'shortfall' },
  { name: 'subagent_context_excess', type: 'gauge', help: 'Rows observed since activation without a qualifying message: reported, never an alarm.', column: 'excess' },
  { name: 'subagent_context_last_observed_timestamp_seconds', type: 'gauge', help: 'Unix time of the newest row observed since activation. Absent when none.', column: 'last_observed_seconds' },
  { name: 'subagent_context_last_subagent_message_timestamp_seconds', type: 'gauge', help: 'Unix time of the newest subagent message created since activation. Absent when none.', column: 'last_message_seconds' },
  { name: 'subagent_context_capture_since_timestamp_seconds', type: 'gauge', help: 'Unix time of activation (the capture_since key). Absent before activation.', column: 'capture_since_seconds' },
  { name: 'subagent_context_failures', type: 'gauge', help: 'Capture failures recorded since activation.', column: 'failures' },
  { name: 'subagent_context_collisions', type: 'gauge', help: 'Rows whose (session, tool call) is shared with a row of another execution.', column: 'collisions' },
  { name: 'subagent_context_attempted_total', type: 'counter', help: 'Qualifying message writes seen by the capture trigger.', column: 'attempted' },
  { name: 'subagent_context_skipped_no_identity_total', type: 'counter', help: 'Qualifying writes skipped for lack of session, task or tool call id.', column: 'skipped_no_identity' },
  { name: 'subagent_context_persisted_total', type: 'counter', help: 'Qualifying writes whose upsert succeeded.', column: 'persisted' },
  { name: 'subagent_context_failed_total', type: 'counter', help: 'Qualifying writes whose upsert failed (caught; the message write went on).', column: 'failed' },
  { name: 'subagent_context_anomalous_value_total', type: 'counter', help: 'Writes with a negative or malformed metric.', column: 'anomalous_value' },
  { name: 'subagent_context_unknown_execution_total', type: 'counter', help: "Persisted writes stored under execution 'unknown'.", column: 'unknown_execution' },
];

/** The Prometheus text exposition format (version 0.0.4) for one scrape. */
export function formatMetrics(schema: string, up: boolean, row: Record<string, unknown> | null, error?: string, packageVersion = PACKAGE_VERSION): string {
  const n = (v: unknown): number | null => (v === null || v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : Number(v));
  const r = row ?? {};
  const lines: string[] = [];
  if (error) lines.push(`# scrape error: ${safe(error.replace(/\s+/g, ' '))}`);
  for (const m of METRICS) {
    let samples: Array<{ labels: Record<string, string>; value: number | null }>;
    if (m.name === 'subagent_context_up') samples = [{ labels: {}, value: up ? 1 : 0 }];
    else if (!up) continue;
    else if (m.name === 'subagent_context_status') {
      samples = STATUS_VALUES.map((v) => ({ labels: { status: v }, value: r.status === v ? 1 : 0 }));
    } else if (m.name === 'subagent_context_info') {
      samples = [{ labels: { installed_version: String(r.installed_version ?? ''), package_version: packageVersion }, value: 1 }];
    } else samples = [{ labels: {}, value: n(r[m.column!]) }];
    // An unknown value (e.g. the shortfall before activation) is left out rather than reported as 0.
    samples = samples.filter((x) => x.value !== null && !Number.isNaN(x.value));
    if (samples.length === 0) continue;
    lines.push(`# HELP ${m.name} ${m.help}`, `# TYPE ${m.name} ${m.type}`);
    for (const x of samples) {
      const labels = Object.entries({ schema, ...x.labels }).map(([k, v]) => `${k}=${labelValue(v)}`).join(',');
      lines.push(`${m.name}{${labels}} ${x.value}`);
    }
  }
  return lines.join('\n') + '\n';
}

async function readMetricsRow(client: pg.ClientBase, schema: string): Promise<Record<string, unknown>> {
  const { rows } = await client.query(sqlFile('dashboards/metrics.sql', schema));
  return rows[0];
}

function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new UserError(`--listen must be HOST:PORT (e.g. 127.0.0.1:9811 or [::1]:9811), got "${value}".`);
  }
  return { host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

async function serve(ctx: CommandContext, listen: string): Promise<number> {
  const { host, port } = parseListen(listen);
  // Fail fast, with the usual one-line errors, when the database is unusable at start.
  const first = await connect(ctx.databaseUrl);
  try {
    await assertSchemaExists(first, ctx.schema);
    await readMetricsRow(first, ctx.schema);
  } catch (err) {
    throw explain(err, ctx.databaseUrl);
  } finally {
    await first.end().catch(() => {});
  }
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2, application_name: 'subagent-context metrics' });
  pool.on('error', () => {});
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') { res.writeHead(405, { Allow: 'GET, HEAD' }).end(); return; }
    if (path === '/') { res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('subagent-context metrics: see /metrics\n'); return; }
    if (path !== '/metrics') { res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found: see /metrics\n'); return; }
    let body: string;
    try {
      const client = await pool.connect();
      try { body = formatMetrics(ctx.schema, true, await readMetricsRow(client, ctx.schema)); } finally { client.release(); }
    } catch (err) {
      body = formatMetrics(ctx.schema, false, null, explain(err, ctx.databaseUrl).message);
    }
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : body);
  };
  const server = createServer((req, res) => { handle(req, res).catch(() => res.destroy()); });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new UserError(`cannot listen on ${listen}: ${err.code ?? err.message}. Pick a free port with --listen HOST:PORT.`)));
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const shown = typeof addr === 'object' && addr ? `${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}` : listen;
  console.log(`serving metrics for schema "${ctx.schema}" of ${redact(ctx.databaseUrl ?? '')} on http://${shown}/metrics`);
  await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await pool.end().catch(() => {});
  return 0;
}

export const metricsCommand: Command = {
  name: 'metrics',
  summary: 'serve health and capture counters in the Prometheus text format (or print them once)',
  usage: `subagent-context metrics [--database-url URL] [--schema S] [--listen HOST:PORT | --once]

Serves GET /metrics in the Prometheus text format, reading the database on every scrape:
${METRICS.map((m) => `  ${m.name.padEnd(58)} ${m.type}`).join('\n')}
subagent_context_status has one series per status value (label status="..."), 1 for health's current
verdict. A value that is unknown (the shortfall before activation) is left out, never reported as 0.
When the database does not answer a scrape, subagent_context_up is 0. Stops on Ctrl-C / SIGTERM.
Alerting rules for these series ship in the package: alerts/subagent-context.rules.yml.

Options:
  --listen HOST:PORT   where to listen (default 127.0.0.1:9811; port 0 picks a free one)
  --once               print the metrics once to stdout and exit (cron, node_exporter textfile)

Examples:
  subagent-context metrics --listen 0.0.0.0:9811
  subagent-context metrics --once > /var/lib/node_exporter/subagent_context.prom
  promtool check rules node_modules/subagent-context/alerts/subagent-context.rules.yml`,
  options: { listen: { type: 'string' }, once: { type: 'boolean' } },
  conflicts: [['listen', 'once']],
  async run(ctx) {
    if (ctx.args.once) {
      const client = await connect(ctx.databaseUrl);
      try {
        await assertSchemaExists(client, ctx.schema);
        process.stdout.write(formatMetrics(ctx.schema, true, await readMetricsRow(client, ctx.schema)));
      } catch (err) {
        throw explain(err, ctx.databaseUrl);
      } finally {
        await client.end().catch(() => {});
      }
      return 0;
    }
    return serve(ctx, (ctx.args.listen as string | undefined) ?? '127.0.0.1:9811');
  },
};
