// Who holds up a health read that ran out of time: the one sentence `health` and the exporter add to
// "took longer than N s". Health is a reader (sql/code/health.sql): only a lock that blocks reading (an ACCESS
// EXCLUSIVE lock on one of our tables or on the messages, from DDL or a LOCK TABLE left open) or a busy
// server can hold it up, so that is what it looks for, on a connection of its own, briefly.
import pg from 'pg';
import { inTransaction } from './db.js';

const HOLDERS = `
  SELECT a.pid, coalesce(a.state, '?') AS state, coalesce(a.usename::text, '?') AS role,
         coalesce(extract(epoch FROM now() - coalesce(a.xact_start, a.query_start))::int, 0) AS seconds,
         left(regexp_replace(coalesce(a.query, ''), '\\s+', ' ', 'g'), 60) AS query, l.relation::regclass::text AS relation
    FROM pg_catalog.pg_locks AS l
    JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
   WHERE l.granted AND l.pid <> pg_catalog.pg_backend_pid() AND l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
     AND l.database = (SELECT d.oid FROM pg_catalog.pg_database AS d WHERE d.datname = pg_catalog.current_database())
     AND l.relation IN (SELECT c.oid FROM pg_catalog.pg_class AS c WHERE c.relnamespace = $1::regnamespace)
   ORDER BY a.xact_start NULLS LAST
   LIMIT 3`;

/**
 * ": held up by pid 123 (role x, idle in transaction for 40 s, LOCK TABLE …) …" or ": no session holds a
 * lock health needs, so the server is busy (see pg_stat_activity)". Never throws: what cannot be asked
 * within about two seconds is said as such.
 */
export async function holdersSentence(databaseUrl: string, schema: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 2000,
    application_name: 'subagent-context (who holds health up)' });
  client.on('error', () => {});
  try {
    await client.connect();
    // Local to its transaction: behind a pooler this server session serves other clients next.
    const { rows } = await inTransaction(client, () => client.query(HOLDERS, [schema]), { settings: { statement_timeout: '2s' } });
    if (rows.length === 0) return '; no session holds a lock health needs, so the server itself is slow (busy or overloaded: see pg_stat_activity)';
    return `; held up by ${rows.map((r) => `pid ${r.pid} (role ${r.role}, ${r.state} for ${r.seconds} s, ACCESS EXCLUSIVE on ${r.relation}` +
      `${r.query ? `: ${r.query}` : ''})`).join(', ')}: end it with pg_terminate_backend(pid) if it should not be there`;
  } catch {
    return '; who holds it up could not be asked';
  } finally {
    await client.end().catch(() => {});
  }
}
