// Ctrl-C (SIGINT) or SIGTERM during a long statement (`up`, `backfill`, `repair`, `uninstall`): closing the client is
// not enough, because a statement the server is running goes on, and commits, after the client is gone.
// So the running statement is cancelled from a second connection (pg_cancel_backend), its transaction
// rolls back, the database is read again, and one sentence says what state it is left in; exit 130.
// Through a pooler the server session is not ours and its pid may be running another client's query by
// then, so the cancel goes through the pooler instead (the protocol's CancelRequest), and the session is
// never terminated.
import pg from 'pg';
import { formatCount, safe } from './output.js';
import { ACTIVATION_KEYS, quoteIdent } from '#sql';
import { withoutInstallation } from './db.js';
import { ownsSession, sendCancel } from './pooler.js';
import { connectClient } from './tls.js';
import { readInstalled } from './installed.js';

/** The exit status after an interrupt, as shells report SIGINT (128 + 2). */
export const INTERRUPTED_EXIT = 130;

/** How long to keep cancelling (a cancel that lands between two statements does nothing) before terminating. */
const CANCEL_FOR_MS = 5_000;

export interface InterruptOptions {
  /** Reads the database after the cancel (on a second connection) and says, in one sentence, what it holds. */
  describe(admin: pg.Client): Promise<string>;
  /** For tests: where the sentence goes (default stderr). */
  write?: (line: string) => void;
}

/**
 * Runs `work` on `client`; on SIGINT or SIGTERM cancels the server-side statement, waits until `work`
 * has stopped, prints the state sentence and exits 130.
 */
export async function cancelOnInterrupt<T>(client: pg.Client, url: string, opts: InterruptOptions, work: () => Promise<T>): Promise<T> {
  const { rows } = await client.query('SELECT pg_catalog.pg_backend_pid() AS pid');
  const pid: number = rows[0].pid;
  const direct = ownsSession(client, pid);
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  let settled = false;
  let interrupted = false;
  const running = work().finally(() => { settled = true; });

  const onSignal = () => {
    if (interrupted) return;  // a second Ctrl-C while cancelling changes nothing: the cancel is under way
    interrupted = true;
    void (async () => {
      write('\ninterrupted: cancelling the statement on the server…');
      let sentence: string;
      let admin: pg.Client | undefined;
      const connectAdmin = async () => (admin = await connectClient(url, { application_name: 'subagent-context cancel' }));
      try {
        // Through a pooler, connecting may have to wait for the statement to end: cancel first.
        if (direct) await connectAdmin();
        const deadline = Date.now() + CANCEL_FOR_MS;
        while (!settled && Date.now() < deadline) {
          // Typed: Citus adds pg_cancel_backend(bigint) beside PostgreSQL's (integer), and `($1)` is ambiguous
          // there. Cancelling the coordinator's backend cancels what it runs on the workers too.
          if (direct) await admin!.query('SELECT pg_catalog.pg_cancel_backend($1::integer)', [pid]);
          else sendCancel(client);
          await Promise.race([running.catch(() => {}), new Promise((r) => setTimeout(r, 200))]);
        }
        if (!settled && direct) {
          // Still running (a cancel each time landed between statements): end the session; its open
          // transaction rolls back with it.
          await admin!.query('SELECT pg_catalog.pg_terminate_backend($1::integer)', [pid]);
        }
        // Through a pooler, leaving ends our transaction too: the pooler rolls back, or closes, the server
        // session it was running on.
        await client.end().catch(() => {});
        if (direct) await waitUntilGone(admin!, pid);
        else await connectAdmin();
        sentence = await opts.describe(admin!);
      } catch (err) {
        sentence = `could not confirm the cancel (${(err as Error).message}): check pg_stat_activity for pid ${pid} ` +
          'before running the command again.';
      } finally {
        await admin?.end().catch(() => {});
      }
      write(safe(sentence));
      process.exit(INTERRUPTED_EXIT);
    })();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const result = await running;
    if (interrupted) await new Promise(() => {});  // the handler reports and exits
    return result;
  } catch (err) {
    if (interrupted) await new Promise(() => {});  // the cancel's own error: the handler reports instead
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** Waits until the cancelled backend has left (its rollback done), so the state read after is final. */
async function waitUntilGone(admin: pg.Client, pid: number): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const { rows } = await admin.query('SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = $1::integer', [pid]);
    if (rows.length === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What an interrupted `up` or `backfill` leaves: read from the database, for the closing sentence. */
export async function describeInstallState(admin: pg.Client, schema: string, rerun: string): Promise<string> {
  const trigger = (await withoutInstallation(admin, schema)).trigger_installed;
  const { rows: [s] } = await admin.query(
    `SELECT to_regclass(format('%I.kandev_meta', $1::text)) IS NOT NULL AS has_meta`, [schema]);
  let keys = 0;
  if (s.has_meta) {
    const { rows } = await admin.query(
      `SELECT count(*)::int AS n FROM ${quoteIdent(schema)}.kandev_meta WHERE key = ANY ($1)`, [ACTIVATION_KEYS]);
    keys = rows[0].n;
  }
  if (keys === 2) {
    // An upgrade of an activated installation: its code is applied in one transaction, which the cancel rolled back.
    const code = await readInstalled(admin, schema).catch(() => null);
    if (code && !code.current) {
      return `the cancelled transaction was rolled back: the installation is left as it was (release ${code.version}, not upgraded), ` +
        `capture is installed and activated; run \`${rerun}\` again to upgrade.`;
    }
    return 'the backfill had already committed when the cancel reached it: capture is installed and activated; nothing to rerun.';
  }
  const captured = trigger ? 'the capture trigger is installed (new subagents are recorded)' : 'the capture trigger is not installed';
  // The backfill's batches commit one by one: those done before the cancel are kept, and the walk resumes after them.
  const { rows: [progress] } = await admin.query(
    `SELECT to_regclass(format('%I.subagent_context_backfill_progress', $1::text)) IS NOT NULL AS has_progress`, [schema]);
  const done = progress.has_progress ? (await admin.query(
    `SELECT batches::float8 AS batches, inserted::float8 AS inserted FROM ${quoteIdent(schema)}.subagent_context_backfill_progress`)).rows[0] : undefined;
  if (done?.batches > 0) {
    return `the backfill stopped after ${formatCount(done.batches)} committed batch${done.batches === 1 ? '' : 'es'}, which stored ` +
      `${formatCount(done.inserted)} history row${done.inserted === 1 ? '' : 's'} (kept), and the batch running was rolled back: ${captured}, ` +
      `capture is not activated yet, and \`${rerun}\` continues the backfill from where it stopped.`;
  }
  return `the cancelled transaction was rolled back: ${captured}, ` +
    `the history is not backfilled and capture is not activated; run \`${rerun}\` again to continue from there.`;
}
