import type { Command } from './types.js';
import { assertSchemaExists, withClient } from '../db.js';
import { healthInstalled, triggerInstalled } from '../health.js';
import { migrate } from '../install.js';
import { sqlFile } from '../sql.js';
import { SQL } from 'sql-template-strings';

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
      await assertSchemaExists(client, ctx.schema);
      const installed = (await healthInstalled(client, ctx.schema)) || (await triggerInstalled(client, ctx.schema));
      const { rows: [{ has_data }] } = await client.query(
        SQL`SELECT to_regclass(format('%I.task_session_subagents', ${ctx.schema}::text)) IS NOT NULL AS has_data`);
      if (!installed && !(ctx.args['drop-data'] && has_data)) {
        // Idempotent for scripts, but honest: say that nothing was there.
        console.log(`nothing to uninstall: subagent-context is not installed in schema "${ctx.schema}"`);
        return 0;
      }
      await migrate(client, ctx.schema, 'down');
      if (ctx.args['drop-data']) await client.query(sqlFile('uninstall-data.sql', ctx.schema));
      console.log(ctx.args['drop-data'] ? 'uninstalled; data dropped' : 'uninstalled; task_session_subagents kept');
      return 0;
    });
  },
};
