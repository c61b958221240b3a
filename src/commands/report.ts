import type { Command } from './types.js';
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { withClient, UserError, assertSchemaExists } from '../db.js';
import { readReport, renderText, renderHtml } from '../report.js';
import { printJson, bold, dim } from '../output.js';

export const reportCommand: Command = {
  name: 'report',
  summary: 'fan-out per turn, subagents per session and card, usage per type and model, nesting, settlement',
  usage: `subagent-context report [--database-url URL] [--schema S] [--json] [--html FILE]

Reads task_session_subagents (through the queries in sql/dashboards/, the same ones the dashboards use)
and shows what kandev's own tables hide: how many subagents each turn fanned out to, subagents per
session and per card next to the misleading "sessions per card", counts and token/duration statistics
per subagent_type and per model, nesting, and how many subagents have settled.

Usage the agent did not report is shown as "unknown" (null in --json), never as 0: Claude's background
(async_launched) subagents never report tokens or duration.

Options:
  --json        the report as one JSON object
  --html FILE   also write one self-contained HTML page (inline SVG charts, no network) to FILE

Examples:
  subagent-context report --database-url postgres://kandev@db/kandev
  subagent-context report --html fanout.html
  subagent-context report --json | jq '.fanout_per_turn'`,
  options: { html: { type: 'string' } },
  async run(ctx) {
    const html = ctx.args.html;
    if (html === '') throw new UserError('--html needs a file name, e.g. --html report.html.');
    return withClient(ctx.databaseUrl, async (client) => {
      await assertSchemaExists(client, ctx.schema);
      const report = await readReport(client, ctx.schema);
      if (typeof html === 'string') {
        const path = resolve(html);
        try {
          await writeFile(path, renderHtml(report));
        } catch (err) {
          throw new UserError(`cannot write the HTML report to ${path}: ${(err as Error).message}. Pass a writable path to --html.`);
        }
        if (!ctx.json) console.error(`wrote the HTML report to ${path}`);
      }
      if (ctx.json) printJson(report);
      else if (typeof html !== 'string') console.log(renderText(report, { bold, dim, bar: (s) => s }));
      return 0;
    });
  },
};
