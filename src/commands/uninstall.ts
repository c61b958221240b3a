import type { Command } from './types.js';
import { withClient } from '../db.js';
import { migrate } from '../install.js';
import { sqlFile } from '../sql.js';

export const uninstallCommand: Command = {
  name: 'uninstall',
  summary: 'remove the trigger and functions (and, with --drop-data, the rows)',
  usage: `subagent-context uninstall [--database-url URL] [--schema S] [--drop-data]

Runs the migrations down: removes the capture trigger, the functions and the activation keys. The
derived rows and the failure log stay unless --drop-data is given.

Example:
  subagent-context uninstall --schema tenant_a`,
  options: { 'drop-data': { type: 'boolean' } },
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await migrate(client, ctx.schema, 'down');
      if (ctx.args['drop-data']) await client.query(sqlFile('uninstall-data.sql', ctx.schema));
      console.log(ctx.args['drop-data'] ? 'uninstalled; data dropped' : 'uninstalled; task_session_subagents kept');
      return 0;
    });
  },
};
