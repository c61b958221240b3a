// Health and stats as the SQL functions report them (sql/code/health.sql, sql/code/stats.sql), read through the same
// files as the report, the metrics and Grafana (sql/dashboards/health.sql, stats.sql).
import type pg from 'pg';
import { assertSchemaExists, withoutInstallation } from './db.js';
import { readDashboard } from './dashboards.js';
import { sameRelease, type InstalledCode } from './installed.js';
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
  /** The one verdict, computed in SQL (sql/code/health.sql). */
  status: HealthStatus;
  /** The release whose code is installed. */
  installed_version: string | null;
  /**
   * When the newest completed reconciliation started (UTC, RFC 3339): history before it was compared
   * then, and only what was written since is compared now. Null when none has completed.
   */
  reconciled_at: string | null;
  /**
   * Subagent messages written since reconciled_at that neither the reconciliation's frontier nor this call
   * has compared yet (counted up to a cap: the cap means "at least"); null before activation.
   */
  uncompared: number | null;
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
  /** `up` has work to do: the code was built for another server major, or by another build of this release. */
  upgradeAvailable: boolean;
}

/** Health's row, as the report, the metrics and Grafana read it (sql/dashboards/health.sql). */
export async function readHealth(client: pg.ClientBase, schema: string): Promise<Health> {
  return (await readDashboard(client, schema, 'dashboards/health.sql'))[0] as unknown as Health;
}

/** The capture counters, as the report and Grafana read them (sql/dashboards/stats.sql). */
export async function readStats(client: pg.ClientBase, schema: string): Promise<Stats> {
  return (await readDashboard(client, schema, 'dashboards/stats.sql'))[0] as unknown as Stats;
}

/**
 * What `health` answers about: this release's installation, or null when the schema (which must exist)
 * holds none. Another release is one sentence (the gate, src/installed.ts).
 */
export async function healthTarget(client: pg.Client, schema: string): Promise<InstalledCode | null> {
  const code = await sameRelease(client, schema);
  if (!code) await assertSchemaExists(client, schema);
  return code;
}

/**
 * Health as every surface shows it: the SQL verdict, its exit status, the counters, and whether `up` has
 * work to do (another server major, or another build of this release). A schema without an installation
 * is `not_installed`. `installed`: what healthTarget() returned, when the caller already asked.
 */
export async function healthReport(client: pg.Client, schema: string, installed?: InstalledCode | null): Promise<HealthReport> {
  const code = installed === undefined ? await healthTarget(client, schema) : installed;
  if (!code?.health) {
    // Without the health function, the verdict of sql/metrics/not-installed.sql: a trigger left behind (a
    // partial removal) is named as such, anything else is not installed.
    const { status } = await withoutInstallation(client, schema);
    return { status, exitCode: exitCodeFor(status), stats: null, upgradeAvailable: false, health: {
      activated: false, capture_since: null, backfill_through: null, shortfall: null, excess: null,
      last_observed_at: null, trigger_enabled: status === 'trigger_orphaned', failures: null, collisions: null,
      status, installed_version: null, reconciled_at: null, uncompared: null } };
  }
  const health = await readHealth(client, schema);
  // A trigger left without its tables may be without its counters too: nothing more to read.
  const stats = health.status === 'trigger_orphaned' ? null : await readStats(client, schema);
  return { status: health.status, exitCode: exitCodeFor(health.status), health, stats, upgradeAvailable: !code.current };
}
