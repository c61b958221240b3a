// A fresh database on a Citus cluster, for the tests and the benchmark: created on the coordinator and on
// every worker with the extension, the workers registered, as ../shared/citus/cluster.sh `db NAME` does,
// but from SQL, starting from any database of the cluster (CITUS_COORDINATOR_URL: what `cluster.sh db`
// printed). Nothing here is part of the product; the operator's cluster is set up by the operator.
import pg from 'pg';
import { quoteIdent } from '#sql';

export interface CitusNode { host: string; port: number }

export interface CitusDatabase {
  /** The coordinator's URL for the new database. */
  url: string;
  name: string;
  coordinator: CitusNode;
  workers: CitusNode[];
  /** The URL of the new database on one node (a worker, for what only a worker's shards show). */
  urlOn(node: CitusNode): string;
  /** Drops the database on every node. */
  drop(): Promise<void>;
}

/** The database of `url` (one that exists on every node) on `node`: where a database is created or dropped from. */
const adminUrl = (url: string, node: CitusNode) => withTarget(url, node, decodeURIComponent(new URL(url).pathname.slice(1)) || 'postgres');

async function dropOn(coordinatorUrl: string, nodes: CitusNode[], name: string): Promise<void> {
  for (const node of nodes) {
    // WITH (FORCE) ends the sessions there, but a worker's session of a coordinator backend just ended can
    // still be on its way out (55006, "being accessed by other users"): try again for a few seconds.
    for (let attempt = 1; ; attempt++) {
      try {
        await withClient(adminUrl(coordinatorUrl, node), (c) => c.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`));
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== '55006' || attempt >= 10) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
}

/** Drops `name` on every node of the cluster behind `coordinatorUrl`, where it exists. */
export async function dropCitusDatabase(coordinatorUrl: string, name: string): Promise<void> {
  const { coordinator, workers } = await citusNodes(coordinatorUrl);
  await dropOn(coordinatorUrl, [coordinator, ...workers], name);
}

/** `url` with another host, port and database (user and password kept). */
function withTarget(url: string, node: CitusNode | null, database: string): string {
  const u = new URL(url);
  if (node) { u.hostname = node.host; u.port = String(node.port); }
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client(url);
  c.on('error', () => {});
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

/**
 * The cluster behind `coordinatorUrl` (a database where Citus knows its workers): where the coordinator
 * and the workers are, as pg_dist_node names them.
 */
export async function citusNodes(coordinatorUrl: string): Promise<{ coordinator: CitusNode; workers: CitusNode[] }> {
  return withClient(coordinatorUrl, async (c) => {
    const citus = (await c.query(`SELECT to_regclass('pg_catalog.pg_dist_node') IS NOT NULL AS ok`)).rows[0].ok;
    const { rows } = citus ? await c.query(
      `SELECT nodename AS host, nodeport AS port, groupid = 0 AS coordinator FROM pg_dist_node
        WHERE isactive AND noderole = 'primary' ORDER BY groupid`) : { rows: [] };
    const workers = rows.filter((r) => !r.coordinator).map((r) => ({ host: r.host as string, port: Number(r.port) }));
    if (workers.length === 0) {
      throw new Error(`${coordinatorUrl.replace(/\/\/[^@/]*@/, '//')} is not a Citus coordinator database with workers ` +
        '(CITUS_COORDINATOR_URL: the URL `bash ../shared/citus/cluster.sh db NAME` prints)');
    }
    const u = new URL(coordinatorUrl);
    const own = rows.find((r) => r.coordinator);
    return { coordinator: own ? { host: own.host, port: Number(own.port) } : { host: u.hostname, port: Number(u.port || 5432) }, workers };
  });
}

/**
 * Creates `name` on the coordinator and every worker of the cluster behind `coordinatorUrl`, with the
 * citus extension, and registers the coordinator and the workers in it; returns its URL and how to drop it.
 */
export async function createCitusDatabase(coordinatorUrl: string, name: string): Promise<CitusDatabase> {
  const { coordinator, workers } = await citusNodes(coordinatorUrl);
  const nodes = [coordinator, ...workers];
  const urlOn = (node: CitusNode) => withTarget(coordinatorUrl, node, name);
  const drop = () => dropOn(coordinatorUrl, nodes, name);
  try {
    for (const node of nodes) {
      await withClient(adminUrl(coordinatorUrl, node), (c) => c.query(`CREATE DATABASE ${quoteIdent(name)}`));
      await withClient(urlOn(node), (c) => c.query('CREATE EXTENSION citus'));
    }
    await withClient(urlOn(coordinator), async (c) => {
      await c.query('SELECT citus_set_coordinator_host($1, $2)', [coordinator.host, coordinator.port]);
      for (const w of workers) {
        // The coordinator's first connection to the worker's new database failed once in a CI run while
        // other files set up theirs ("failure on connection marked as essential"): try it again, briefly.
        for (let attempt = 1; ; attempt++) {
          try {
            await c.query('SELECT citus_add_node($1, $2)', [w.host, w.port]);
            break;
          } catch (err) {
            if (!/failure on connection marked as essential/.test((err as Error).message) || attempt >= 5) throw err;
            await new Promise((r) => setTimeout(r, 1000));
          }
        }
      }
    });
  } catch (err) {
    await drop().catch(() => {});
    throw err;
  }
  return { url: urlOn(coordinator), name, coordinator, workers, urlOn, drop };
}
