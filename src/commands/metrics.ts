import type { Command } from './types.js';
import { checkUrl, NO_DATABASE_SENTENCE } from '../db.js';
import { UserError } from '../errors.js';
import { printJson } from '../output.js';
import { METRICS, formatMetrics, metricsJson } from '../metrics/format.js';
import { evaluate } from '../metrics/evaluate.js';
import { afterEvaluation } from '../metrics/after-evaluation.js';
import { scrubSecrets } from '../secrets.js';

/** Defaults: below Prometheus' default scrape_timeout (10 s), and a cache that merges bursts of scrapes. */
const DEFAULT_TIMEOUT_SECONDS = 8;
const DEFAULT_CACHE_SECONDS = 5;

function seconds(value: unknown, flag: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(String(value)) || n < min || n > 3600) {
    throw new UserError(`--${flag} takes a number of seconds from ${min} to 3600, got "${value}".`);
  }
  return n;
}

export const metricsCommand: Command = {
  name: 'metrics',
  summary: 'serve health and capture counters in the Prometheus text format (or print them once)',
  usage: `subagent-context metrics [--database-url URL] [--schema S] [--listen HOST:PORT | --once [--json]]
                         [--timeout-seconds N] [--cache-seconds N] [--web-config-file FILE]

Serves GET /metrics in the Prometheus text format:
${METRICS.map((m) => `  ${m.name.padEnd(58)} ${m.type}`).join('\n')}
subagent_context_status has one series per status value (label status="..."), 1 for health's current
verdict; not_installed when the schema has no installation. A value that is unknown (the shortfall before
activation) is left out, never reported as 0. subagent_context_up is 0 only when the database could not be
read (unreachable, refused, too slow, no privilege): the scrape says why in a "# scrape error:" comment.
subagent_context_upgrade_required is 1 when the installed release is older: run \`subagent-context up\`.
Alerting rules for these series ship in the package: alerts/subagent-context.rules.yml.

Scrapes share the work: one evaluation at a time serves every scrape that arrives while it runs, its result
is served again for --cache-seconds, and it is cancelled in the database when every scrape waiting for it
has gone. It starts listening at once; the first scrape reads the database. Stops on Ctrl-C / SIGTERM.

Options:
  --listen HOST:PORT        where to listen (default 127.0.0.1:9811, this machine only; port 0 picks a free one)
  --web-config-file FILE    TLS and basic auth, in the Prometheus exporter toolkit's format (docs/security.md):
                            needed before listening anywhere but loopback
  --timeout-seconds N       every query's statement_timeout; an evaluation with no answer 0.5 s later is
                            abandoned (default ${DEFAULT_TIMEOUT_SECONDS}; keep it below Prometheus' scrape_timeout, 10 s unless set)
  --cache-seconds N         serve a finished evaluation again for N seconds (default ${DEFAULT_CACHE_SECONDS}; 0: never)
  --once                    print the metrics once to stdout and exit (cron, node_exporter textfile); exit 3
                            when the database could not be read
  --json                    with --once: one JSON object of the same values (unknown values are null)

Examples:
  subagent-context metrics
  subagent-context metrics --listen 0.0.0.0:9811 --web-config-file /etc/subagent-context/web.yml
  subagent-context metrics --once > /var/lib/node_exporter/subagent_context.prom
  promtool check rules node_modules/subagent-context/alerts/subagent-context.rules.yml`,
  options: {
    listen: { type: 'string' }, once: { type: 'boolean' },
    'timeout-seconds': { type: 'string' }, 'cache-seconds': { type: 'string' }, 'web-config-file': { type: 'string' },
  },
  conflicts: [['listen', 'once'], ['web-config-file', 'once'], ['cache-seconds', 'once']],
  async run(ctx) {
    const timeoutMs = seconds(ctx.args['timeout-seconds'], 'timeout-seconds', DEFAULT_TIMEOUT_SECONDS, 0.1) * 1000;
    const cacheMs = seconds(ctx.args['cache-seconds'], 'cache-seconds', DEFAULT_CACHE_SECONDS, 0) * 1000;
    if (!ctx.databaseUrl) throw new UserError(NO_DATABASE_SENTENCE);
    checkUrl(ctx.databaseUrl); // a URL that cannot work fails now, not at the first scrape
    const target = { databaseUrl: ctx.databaseUrl, schema: ctx.schema, timeoutMs };
    if (ctx.json && !ctx.args.once) throw new UserError('--json goes with --once (a scrape is always the Prometheus text format).');
    if (ctx.args.once) {
      const evaluation = await evaluate(target);
      if (ctx.json) printJson(metricsJson(ctx.schema, evaluation));
      else process.stdout.write(formatMetrics(ctx.schema, evaluation));
      // The background share of the reconciliation, once the metrics are out; a fault there is not this
      // scrape's (logged, scrubbed).
      await afterEvaluation(evaluation, { ...target, signal: new AbortController().signal, once: true })
        .catch((err: unknown) => console.error(`after evaluation: ${scrubSecrets(String((err as Error)?.message ?? err), target.databaseUrl)}`));
      if (!evaluation.up) throw new UserError(evaluation.error ?? 'the database could not be read.');
      return 0;
    }
    // Loaded only to serve: TLS, YAML and bcrypt are not every command's business.
    const { serveMetrics } = await import('../metrics/server.js');
    return serveMetrics({ ...target, cacheMs, listen: (ctx.args.listen as string | undefined) ?? '127.0.0.1:9811',
      webConfigFile: ctx.args['web-config-file'] as string | undefined });
  },
};
