import type { Command } from './types.js';
import { withClient } from '../db.js';
import { quoteIdent } from '../sql.js';
import { printJson } from '../output.js';

export const repairCommand: Command = {
  name: 'repair',
  summary: 're-derive the rows the shortfall lists as missing, from message history',
  usage: `subagent-context repair [--database-url URL] [--schema S] [--json]

Stores, for every subagent the health shortfall counts as missing, the row derived from its newest
message. Rows that exist are never touched. Afterwards the shortfall is 0.

Example:
  subagent-context health || subagent-context repair`,
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      const { rows } = await client.query(
        `SELECT repaired::float8 AS repaired FROM ${quoteIdent(ctx.schema)}.subagent_context_repair()`);
      const repaired = rows[0].repaired as number;
      if (ctx.json) printJson({ repaired });
      else console.log(`repaired ${repaired} missing row${repaired === 1 ? '' : 's'}`);
      return 0;
    });
  },
};
