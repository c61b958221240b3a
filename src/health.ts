// Health and stats as the SQL functions report them (sql/health.sql, sql/stats.sql).
import type pg from 'pg';
import { PACKAGE_VERSION, quoteIdent } from '#sql';
import { assertSchemaExists, captureTriggerExists, UserError } from './db.js';
import { readInstalledCode } from './install.js';
import { SQL } from 'sql-template-strings';
import { exitCodeFor, type HealthStatus } from './status.js';

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
  /** The one verdict, computed in SQL (sql/health.sql). */
  status: HealthStatus;
  /** The release whose code is installed. */
  installed_version: string | null;
  /**
   * When the newest completed reconciliation started (UTC, RFC 3339): history before it was compared
   * then, and only what was written since is compared now. Null when none has completed.
   */
  reconciled_at: string | null;
}

export interface Stats {
  attempted: number;
  skipped_no_identity: number;
  persisted: number;
  failed: number;
  anomalous_value: number;
  unknown_execution: number;
}

export { HEALTH_STATUSES, exitCodeFor, type HealthStatus } from './status.js';

/** What `subagent-context health` reports. */
export interface HealthReport {
  status: HealthStatus;
  exitCode: 0 | 1 | 2;
  health: Health;
  stats: Stats | null;
  /** The package is newer than the installation (or built for another server major): run `up`. */
  upgradeAvailable: boolean;
}

export async function readHealth(client: pg.Client, schema: string): Promise<Health> {
  const { rows } = await client.query(
    `SELECT activated, capture_since, backfill_through, shortfall::float8 AS shortfall, excess::float8 AS excess,
            to_char(last_observed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_observed_at,
            trigger_enabled, failures::float8 AS failures, collisions::float8 AS collisions,
            status, installed_version, to_char(reconciled_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS reconciled_at
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

/**
 * Health as every surface shows it: the SQL verdict, its exit status, the counters, and whether the
 * package is newer than the installation. A schema without an installation is `not_installed`.
 */
export async function healthReport(client: pg.Client, schema: string): Promise<HealthReport> {
  await assertSchemaExists(client, schema);
  if (!(await healthInstalled(client, schema))) {
    // Without the health function there is no SQL verdict to read: a trigger left behind (a partial
    // removal) is named as such, anything else is not installed.
    const status = (await captureTriggerExists(client, schema)) ? 'trigger_orphaned' : 'not_installed';
    return { status, exitCode: exitCodeFor(status), stats: null, upgradeAvailable: false, health: {
      activated: false, capture_since: null, backfill_through: null, shortfall: null, excess: null,
      last_observed_at: null, trigger_enabled: status === 'trigger_orphaned', failures: null, collisions: null,
      status, installed_version: null, reconciled_at: null } };
  }
  const code = await readInstalledCode(client, schema);
  if (code && code.code_digest === null) {
    // 0.1.0's health function has neither `status` nor `installed_version`: say what to do instead.
    throw new UserError(`subagent-context ${code.version} is installed in schema "${schema}"; this is ${PACKAGE_VERSION}. ` +
      'Run `subagent-context up` to upgrade it in place (docs/upgrade.md).');
  }
  const health = await readHealth(client, schema);
  // A trigger left without its tables may be without its counters too: nothing more to read.
  const stats = health.status === 'trigger_orphaned' ? null : await readStats(client, schema);
  return { status: health.status, exitCode: exitCodeFor(health.status), health, stats, upgradeAvailable: !code?.current };
}
