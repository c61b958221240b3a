import type { Command } from './types.js';
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { withClient, assertSchemaExists } from '../db.js';
import { UserError } from '../errors.js';
import { readReport, renderText, renderHtml, reportJson, parseWindow, futureWindowWarning, statementTimeout, DEFAULT_STATEMENT_TIMEOUT } from '../report/index.js';
import { bold, dim, terminalWidth } from '../output.js';
import { sameRelease } from '../installed.js';

/** The host as the operator named it in the URL (no credentials); undefined for a socket or no URL. */
function urlHost(url: string | undefined): string | undefined {
  try { return url ? new URL(url).hostname || undefined : undefined; } catch { return undefined; }
}

export const reportCommand: Command = {
  name: 'report',
  summary: 'fan-out per turn and day, top cards and sessions, usage per type and model, what is still running',
  usage: `subagent-context report [--database-url URL] [--schema S] [--since WHEN] [--until WHEN] [--json] [--html FILE] [--width N]
                       [--statement-timeout DURATION]

Reads task_session_subagents (through the queries in sql/dashboards/ and sql/report/, one readable file
per panel) and shows what kandev's own tables hide: how many subagents each turn fanned out to,
subagents per day, the cards and sessions that launched the most subagents and spent the most tokens
(with the card's title), subagents per session and per card next to the misleading "sessions per card",
token and duration statistics per subagent_type and per model, nesting, and what is still running,
with its age.

Usage the agent did not report is shown as "unknown" (null in --json), never as 0: Claude's background
(async_launched) subagents never report tokens or duration. A background launch "settles" when the
launch returns, so its run time is known only where the agent reported duration_ms.

Options:
  --since WHEN  only subagents first observed at or after WHEN: a date (2026-08-01; 0001-01-01 to
                9999-12-31), a date and time (2026-08-01T09:30, UTC unless it has Z or an offset), now,
                or a time ago: 30m, 12h, 7d, 2w (or -7d)
  --until WHEN  only those observed before WHEN (a date alone includes that whole day)
                The window applies to the terminal report, --json and --html alike; health is not windowed.
  --json        the report as one JSON object
  --html FILE   write one self-contained HTML page (inline SVG charts, no network) to FILE
  --width N     terminal columns to fit (default: the terminal's width, else $COLUMNS, else 80)
  --statement-timeout DURATION
                stop a query that runs longer (30s, 5min, 1h; 0 for none). Default: the timeout the
                server, the role or PGOPTIONS set, else ${DEFAULT_STATEMENT_TIMEOUT}, so a runaway query cannot run forever

Text from the database (types, models, titles, ids) is shown with its control and bidi characters
escaped: as \x1b on the terminal and in the HTML page, as \u202e in --json (the same JSON value).

Examples:
  subagent-context report --database-url postgres://kandev@db/kandev
  subagent-context report --since 7d
  subagent-context report --html fanout.html
  subagent-context report --since 2026-08-01 --until 2026-08-31 --html august.html
  subagent-context report --json | jq '.top_cards.by_tokens'`,
  options: { html: { type: 'string' }, since: { type: 'string' }, until: { type: 'string' }, width: { type: 'string' },
    'statement-timeout': { type: 'string' } },
  async run(ctx) {
    const html = ctx.args.html;
    if (html === '') throw new UserError('--html needs a file name, e.g. --html report.html.');
    const window = parseWindow(ctx.args.since as string | undefined, ctx.args.until as string | undefined);
    const width = terminalWidth(ctx.args.width as string | undefined);
    const timeoutFlag = ctx.args['statement-timeout'] as string | undefined;
    statementTimeout(timeoutFlag, '0');  // a bad value is a usage error before connecting
    return withClient(ctx.databaseUrl, async (client) => {
      await assertSchemaExists(client, ctx.schema);
      await sameRelease(client, ctx.schema);
      const report = await readReport(client, ctx.schema, { window, host: urlHost(ctx.databaseUrl), statementTimeout: timeoutFlag });
      // An empty report of a window that has not begun says why it is empty.
      const future = report.overview.subagents === 0 ? futureWindowWarning(window) : null;
      if (future) console.error(future);
      if (typeof html === 'string') {
        const path = resolve(html);
        try {
          await writeFile(path, renderHtml(report));
        } catch (err) {
          throw new UserError(`cannot write the HTML report to ${path}: ${(err as Error).message}. Pass a writable path to --html.`);
        }
        if (!ctx.json) console.error(`wrote the HTML report to ${path}`);
      }
      if (ctx.json) process.stdout.write(reportJson(report) + '\n');
      else if (typeof html !== 'string') console.log(renderText(report, { bold, dim, bar: (s) => s }, width));
      return 0;
    }, ctx.schema);
  },
};
