// A fresh database on a Citus cluster per test file (test/citus/), created on the coordinator and every
// worker with the workers registered (kandev/citus-cluster.ts), dropped on every node after the file: the
// Citus files never share state, and can run side by side.
//
// The cluster: CITUS_COORDINATOR_URL, a database of its coordinator in which Citus knows the workers (what
// `bash ../shared/citus/cluster.sh db NAME` prints; .ci/run starts a cluster of its own). Without it the
// file skips, saying so in one line.
import { afterAll, inject } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { createCitusDatabase, type CitusDatabase } from '../../kandev/citus-cluster.js';
import { createHostTables, type Queryable } from '../../kandev/host.js';
import { quoteIdent } from '#sql';
import { up } from '../../src/install.js';

// The same exact values as test/helpers/database.ts: timestamps as text, bigint as BigInt.
pg.types.setTypeParser(1114, (v: string) => v);
pg.types.setTypeParser(20, (v: string) => BigInt(v));

export const CITUS_COORDINATOR_URL = process.env.CITUS_COORDINATOR_URL;

export interface CitusTestDatabase extends CitusDatabase {
  /** A new dedicated connection to the coordinator (closed after the file); notices are dropped. */
  connect(): Promise<pg.Client>;
  /** A new dedicated connection to the same database on a worker (closed after the file). */
  connectTo(node: CitusDatabase['workers'][number]): Promise<pg.Client>;
  query<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<T>>;
  /**
   * kandev's tables in `schema`, distributed and co-located as docs/citus.md's steps 1 and 2 have the
   * operator do ('host only': step 1 alone, the capture tables not created).
   */
  createHost(schema?: string, citus?: true | 'host only'): Promise<void>;
  /** `subagent-context up` into `schema`, on the coordinator. */
  up(schema?: string): ReturnType<typeof up>;
}

/**
 * A database of its own on the cluster for this file (call it at file level, with top-level await), or
 * null when there is no cluster: then `file` is said to be skipped, once.
 */
export async function freshCitusDatabase(label: string, file: string): Promise<CitusTestDatabase | null> {
  if (!CITUS_COORDINATOR_URL) {
    console.warn(`${file} skipped: set CITUS_COORDINATOR_URL to a Citus coordinator (docs/citus.md) to run it`);
    return null;
  }
  const name = `${inject('databasePrefix')}citus_${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase().slice(0, 24)}_${randomBytes(3).toString('hex')}`;
  const db = await createCitusDatabase(CITUS_COORDINATOR_URL, name);
  const clients: pg.Client[] = [];
  const open = async (url: string) => {
    const c = new pg.Client(url);
    c.on('error', () => {});
    c.on('notice', () => {});
    await c.connect();
    clients.push(c);
    return c;
  };
  const main = await open(db.url);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await db.drop();
  });
  return {
    ...db,
    connect: () => open(db.url),
    connectTo: (node) => open(db.urlOn(node)),
    query: <T extends pg.QueryResultRow>(text: string, values?: unknown[]) => main.query<T>(text, values),
    createHost: (schema = 'public', citus = true) => createHostTables(main, schema, { citus }),
    up: (schema = 'public') => up(main, schema),
  };
}

/** The worker (host:port) that holds `session`'s shard of `schema`.task_session_messages. */
export async function workerOf(db: CitusTestDatabase, schema: string, session: string): Promise<string> {
  const { rows: [r] } = await db.query(
    `SELECT s.nodename || ':' || s.nodeport AS node FROM citus_shards AS s
      WHERE s.table_name = format('%I.task_session_messages', $1::text)::regclass
        AND s.shardid = get_shard_id_for_distribution_column(format('%I.task_session_messages', $1::text), $2::text)`,
    [schema, session]);
  return r.node as string;
}

/** Every row of `schema`.task_session_subagents but its id (a random uuid), as jsonb text, in key order. */
export async function derivedRows(q: Queryable, schema: string): Promise<string[]> {
  const { rows } = await q.query(
    `SELECT (to_jsonb(r) - 'id')::text AS row FROM ${quoteIdent(schema)}.task_session_subagents AS r
      ORDER BY r.task_session_id, r.tool_call_id, r.agent_execution_id`);
  return rows.map((r) => r.row as string);
}

/** One line on how two stores' rows compare: "N rows, the same" or where they part. */
export function compareRows(got: string[], want: string[]): string {
  const at = got.findIndex((row, i) => row !== want[i]);
  if (at === -1 && got.length === want.length) return `${want.length} rows, the same`;
  const i = at === -1 ? Math.min(got.length, want.length) : at;
  return `${got.length} rows against ${want.length}; the first difference, at row ${i}: ${got[i] ?? '(none)'} instead of ${want[i] ?? '(none)'}`;
}
