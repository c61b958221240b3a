import type { Command } from './types.js';
import { assertSchemaExists, captureTriggerExists, withClient } from '../db.js';
import { healthInstalled } from '../health.js';
import { migrate } from '../install.js';
import { sqlStatements } from '#sql';
import { SQL } from 'sql-template-strings';
import { safe } from '../output.js';

export const uninstallCommand: Command = {
  name: 'uninstall',
  summary: 'remove the trigger and functions (and, with --drop-data, the rows)',
  usage: `subagent-context uninstall [--database-url URL] [--schema S] [--drop-data]

Runs the migrations down: removes the capture trigger, the functions and the activation keys. The
derived rows and the failure log stay unless --drop-data is given. --drop-data drops only a
task_session_subagents that subagent-context created: when kandev created it (adopted at install), it
refuses and removes nothing.

Example:
  subagent-context uninstall --schema tenant_a`,
  options: { 'drop-data': { type: 'boolean' } },
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await assertSchemaExists(client, ctx.schema);
      // A trigger left by a partial or hand-made removal still counts as something to uninstall.
      const installed = (await healthInstalled(client, ctx.schema)) || (await captureTriggerExists(client, ctx.schema));
      const { rows: [{ has_data }] } = await client.query(
        SQL`SELECT to_regclass(format('%I.task_session_subagents', ${ctx.schema}::text)) IS NOT NULL AS has_data`);
      if (!installed && !(ctx.args['drop-data'] && has_data)) {
        // Idempotent for scripts, but honest: say that nothing was there.
        console.log(`nothing to uninstall: subagent-context is not installed in schema "${safe(ctx.schema)}"`);
        return 0;
      }
      const dropData = ctx.args['drop-data'] ? sqlStatements('uninstall-data.sql', ctx.schema) : [];
      // --drop-data refuses before anything is removed when the table is kandev's (its first statement).
      if (dropData.length) await client.query(dropData[0]);
      await migrate(client, ctx.schema, 'down');
      for (const statement of dropData) await client.query(statement);
      console.log(ctx.args['drop-data'] ? 'uninstalled; data dropped' : 'uninstalled; task_session_subagents kept');
      return 0;
    });
  },
};
