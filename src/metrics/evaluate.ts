// One evaluation: what the metrics say about one schema. Every fault (refused, reset, terminated, cut, silent) ends as `up: false` with a reason, never as
// an exception or an 'error' event nobody listens to; every query is bounded by statement_timeout, the
// whole by a deadline, and `signal` (no scrape is waiting any more) cancels the server-side query.
import pg from 'pg';
import { sqlFile } from '#sql';
import { assertSchemaExists, explain, inTransaction, PrivilegeError, privilegeMessage, withoutInstallation } from '../db.js';
import { readInstalled } from '../installed.js';
import { sendCancel } from '../pooler.js';
import { connectClient } from '../tls.js';
import { rememberSecret, scrubSecrets } from '../secrets.js';
import { holdersSentence } from '../holders.js';
import type { HealthStatus } from '../status.js';

export interface Evaluation {
  /** The database answered and what is installed could be read (nothing installed counts as read). */
  up: boolean;
  /** health's verdict; null when unknown (down, or a release too old to say). */
  status: HealthStatus | null;
  /** The installed release; null when nothing is installed. */
  installedVersion: string | null;
  /** Whether `up` has work to do on the installation; null when unknown or nothing is installed. */
  upgradeRequired: boolean | null;
  /** metrics.sql's row (sql/dashboards/metrics.sql), or what is known without it. */
  row: Record<string, unknown> | null;
  /** Why `up` is false (or what could not be read), scrubbed of secrets. */
  error?: string;
  /** The database answered but refused the exporter's role a privilege (SQLSTATE 42501): `error` names the GRANT. */
  permissionDenied?: boolean;
  /**
   * The database answered but health did not finish within the timeout (statement_timeout): slow, not
   * down. `up` is false (nothing was read), and the alerts tell it from a database that does not answer.
   */
  slow?: boolean;
  /** How long it took, in ms. */
  durationMs?: number;
  /** When it finished, in ms since the epoch (what the cache's age is measured from). */
  finishedAt: number;
}

export interface EvaluationTarget {
  databaseUrl: string;
  schema: string;
  /** The longest the whole evaluation may take; each query's statement_timeout too. */
  timeoutMs: number;
}

/** How the exporter's sessions show in pg_stat_activity. */
export const APPLICATION_NAME = 'subagent-context metrics';

/** SQLSTATEs of a name that an older release does not have (function, table, column). */
const OLDER_RELEASE = new Set(['42883', '42P01', '42703']);

/** What pg's Client holds but its types do not declare. */
interface ClientInternals { password?: unknown; connection?: { stream?: { destroy(): void } } }
const internals = (client: pg.Client) => client as unknown as ClientInternals;

/** Ends the connection; one that does not close within a second (a silent network) is destroyed. */
async function close(client: pg.Client): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    client.end().catch(() => {}),
    new Promise<void>((resolve) => { timer = setTimeout(() => { internals(client).connection?.stream?.destroy(); resolve(); }, 1000); }),
  ]);
  clearTimeout(timer);
}

type Known = Omit<Evaluation, 'finishedAt'>;

/** What the schema holds, read inside the evaluation's transaction. */
async function readState(client: pg.Client, schema: string): Promise<Known> {
  await assertSchemaExists(client, schema);
  const code = await readInstalled(client, schema);
  if (!code) {
    // Nothing to ask: no installation, or only the trigger left behind (docs/uninstall.md).
    const { status, trigger_installed } = await withoutInstallation(client, schema);
    return { up: true, status, installedVersion: null, upgradeRequired: null, row: { trigger_installed } };
  }
  const tooOld: Known = { up: true, status: null, installedVersion: code.version, upgradeRequired: true, row: null };
  // 0.1.0's health has no status column: this release cannot read it, and says "upgrade" instead.
  if (code.code_digest === null) return tooOld;
  // An earlier release may lack what metrics.sql reads: its failure must leave the transaction usable.
  if (!code.current) await client.query('SAVEPOINT earlier_release');
  try {
    const { rows } = await client.query(sqlFile('dashboards/metrics.sql', schema));
    const row = rows[0] as Record<string, unknown>;
    return { up: true, status: row.status as HealthStatus, installedVersion: (row.installed_version as string | null) ?? code.version,
      upgradeRequired: !code.current, row };
  } catch (err) {
    if (!code.current && OLDER_RELEASE.has((err as { code?: string }).code ?? '')) return earlierRelease(client, schema, tooOld);
    throw err;
  }
}

/**
 * An earlier release in the upgrade window: its own verdict and health, read by column name
 * (sql/metrics/earlier-release.sql), with the upgrade still required; when even that cannot be read,
 * the upgrade alone, said in the scrape error.
 */
async function earlierRelease(client: pg.Client, schema: string, tooOld: Known): Promise<Known> {
  await client.query('ROLLBACK TO SAVEPOINT earlier_release');
  try {
    const { rows: [row] } = await client.query(sqlFile('metrics/earlier-release.sql', schema));
    return { ...tooOld, status: row.status as HealthStatus, row };
  } catch (err) {
    if (!OLDER_RELEASE.has((err as { code?: string }).code ?? '')) throw err;
    return { ...tooOld, error: `subagent-context ${tooOld.installedVersion} is installed; this exporter reads its health after \`subagent-context up\`` };
  }
}

/**
 * Evaluates, again and again, on one connection kept between evaluations: a new backend per scrape would
 * pay a fork and cold catalog caches each time (about 100 ms, ten times the query on a warm one). Any
 * fault discards the connection, and the next evaluation opens a fresh one; an 'error' event on the idle
 * connection (the server restarted, pg_terminate_backend, the network dropped) is listened to and only
 * marks it for that.
 */
export class Evaluator {
  private client: pg.Client | null = null;
  private broken = new WeakSet<pg.Client>();

  constructor(private readonly target: EvaluationTarget) {}

  private async connection(): Promise<pg.Client> {
    if (this.client && !this.broken.has(this.client)) return this.client;
    if (this.client) this.discard(this.client);
    const { databaseUrl, timeoutMs } = this.target;
    const client = await connectClient(databaseUrl, { application_name: APPLICATION_NAME, connectionTimeoutMillis: timeoutMs, keepAlive: true },
      (attempt) => {
        // A dropped connection also rejects the query in flight, which is where it is reported.
        attempt.on('error', () => { this.broken.add(attempt); });
        attempt.on('end', () => { this.broken.add(attempt); });
        attempt.on('notice', () => {});
        this.client = attempt;
      });
    const password = internals(client).password;
    if (typeof password === 'string') rememberSecret(password); // from the URL, PGPASSWORD or a pgpass file
    return client;
  }

  private discard(client: pg.Client): void {
    this.broken.add(client);
    if (this.client === client) this.client = null;
    void close(client);
  }

  /** Never rejects: every failure is an Evaluation with `up: false` and its reason. */
  async evaluate(signal?: AbortSignal): Promise<Evaluation> {
    const { databaseUrl, schema, timeoutMs } = this.target;
    const startedAt = Date.now();
    let client: pg.Client | null = null;
    let stopped: string | undefined;
    let giveUp: (reason: Error) => void = () => {};
    const abandoned = new Promise<never>((_resolve, reject) => { giveUp = reject; });
    abandoned.catch(() => {});
    const stop = (reason: string) => {
      if (stopped) return;
      stopped = reason;
      if (client) sendCancel(client);
      // The server gets half a second to answer the cancel; a silent network gets no more.
      setTimeout(() => giveUp(new Error(reason)), 500).unref();
    };
    // statement_timeout ends a slow query in the server first; this deadline, half a second later, is for a
    // connection that answers nothing at all (a silent network, a stuck connect).
    const deadline = setTimeout(() => stop(`the database did not answer within ${timeoutMs / 1000} s (--timeout-seconds)`), timeoutMs + 500);
    const onAbort = () => stop('cancelled: no scrape is waiting for it any more');
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    try {
      const work = (async () => {
        const c = await this.connection();
        client = c;
        if (stopped) throw new Error(stopped);
        // Local to the transaction, not a startup parameter: a pooler such as PgBouncer refuses unknown startup
        // parameters and shares sessions between clients, but keeps a transaction's settings to the transaction.
        return inTransaction(c, () => readState(c, schema), { settings: { statement_timeout: `${timeoutMs}ms` }, rollback: (state) => Boolean(state.error) });
      })();
      work.catch(() => {}); // when the deadline wins the race, whatever the connection does later is moot
      const known = await Promise.race([abandoned, work]);
      return { ...known, durationMs: Date.now() - startedAt, finishedAt: Date.now() };
    } catch (err) {
      // Whatever went wrong, the next evaluation starts on a fresh connection (this one may be mid-query,
      // in a failed transaction, or dead).
      if (this.client) this.discard(this.client);
      const e = err as { code?: string; message?: string };
      const explained = stopped || e.code === '57014' ? null : explain(err, databaseUrl, schema);
      const reason = stopped ?? (e.code === '57014'
        ? `the database answered, but health took longer than ${timeoutMs / 1000} s (--timeout-seconds) and was cancelled by ` +
          `statement_timeout${await holdersSentence(databaseUrl, schema)}`
        // A missing privilege names the GRANT, as `report` does.
        : explained instanceof PrivilegeError ? privilegeMessage('metrics', schema, explained) : explained!.message);
      return { up: false, status: null, installedVersion: null, upgradeRequired: null, row: null,
        error: scrubSecrets(reason, databaseUrl), permissionDenied: !stopped && e.code === '42501', slow: !stopped && e.code === '57014',
        durationMs: Date.now() - startedAt, finishedAt: Date.now() };
    } finally {
      clearTimeout(deadline);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Closes the connection kept between evaluations. */
  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    if (client) await close(client);
  }
}

/** One evaluation on a connection of its own, closed after (`metrics --once`). */
export async function evaluate(target: EvaluationTarget, signal?: AbortSignal): Promise<Evaluation> {
  const evaluator = new Evaluator(target);
  try {
    return await evaluator.evaluate(signal);
  } finally {
    await evaluator.close();
  }
}
