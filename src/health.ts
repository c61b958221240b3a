// Health and stats as the SQL functions report them (sql/health.sql, sql/stats.sql).
import type pg from 'pg';
import { quoteIdent } from './sql.js';
import { SQL } from 'sql-template-strings';

export interface Health {
  activated: boolean;
  capture_since: string | null;
  backfill_through: string | null;
  shortfall: number | null;
  excess: number | null;
  last_observed_at: string | null;
  trigger_enabled: boolean;
  failures: number | null;
  /** NULL only when nothing is installed. */
  collisions: number | null;
}

export interface Stats {
  attempted: number;
  skipped_no_identity: number;
  persisted: number;
  failed: number;
  anomalous_value: number;
  unknown_execution: number;
}

export type HealthStatus =
  'healthy' | 'idle' | 'shortfall' | 'not activated' | 'trigger missing' | 'trigger disabled' | 'not installed';

/** What `subagent-context health` reports. */
export interface HealthReport {
  status: HealthStatus;
  exitCode: 0 | 1 | 2;
  /** Is the capture trigger present (enabled or not)? */
  installed: boolean;
  health: Health;
  stats: Stats | null;
}

export async function readHealth(client: pg.Client, schema: string): Promise<Health> {
  const { rows } = await client.query(
    `SELECT activated, capture_since, backfill_through, shortfall::float8 AS shortfall, excess::float8 AS excess,
            to_char(last_observed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_observed_at,
            trigger_enabled, failures::float8 AS failures, collisions::float8 AS collisions
       FROM ${quoteIdent(schema)}.subagent_context_health()`);
  return rows[0] as Health;
}

export async function readStats(client: pg.Client, schema: string): Promise<Stats> {
  const { rows } = await client.query(
    `SELECT attempted::float8 AS attempted, skipped_no_identity::float8 AS skipped_no_identity,
            persisted::float8 AS persisted, failed::float8 AS failed,
            anomalous_value::float8 AS anomalous_value, unknown_execution::float8 AS unknown_execution
       FROM ${quoteIdent(schema)}.subagent_context_stats()`);
  return rows[0] as Stats;
}

/** Is subagent_context_health() there to ask? (False before `up`, or in another schema.) */
export async function healthInstalled(client: pg.Client, schema: string): Promise<boolean> {
  const { rows } = await client.query(
    SQL`SELECT to_regprocedure(format('%I.subagent_context_health()', ${schema}::text)) IS NOT NULL AS installed`);
  return rows[0].installed;
}

export async function triggerInstalled(client: pg.Client, schema: string): Promise<boolean> {
  const { rows } = await client.query(
    SQL`SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(format('%I.task_session_messages', ${schema}::text))
        AND tgname = 'subagent_context_capture'`);
  return rows.length > 0;
}

/** The verdict, and the CLI's exit status: 0 healthy or idle, 1 shortfall, 2 not activated or trigger off. */
export function verdict(h: Health, installed: boolean): { status: HealthStatus; exitCode: 0 | 1 | 2 } {
  if (!installed) return { status: 'trigger missing', exitCode: 2 };
  if (!h.trigger_enabled) return { status: 'trigger disabled', exitCode: 2 };
  if (!h.activated) return { status: 'not activated', exitCode: 2 };
  if ((h.shortfall ?? 0) > 0) return { status: 'shortfall', exitCode: 1 };
  if (h.last_observed_at === null) return { status: 'idle', exitCode: 0 };
  return { status: 'healthy', exitCode: 0 };
}
