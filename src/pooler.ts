// Connections through a pooler (pgbouncer and the like). There the server session is not the client's:
// in transaction pooling it serves other clients between our transactions, and the next transaction may
// run on another (docs/install.md#behind-a-connection-pooler). So nothing of ours is left on it, and
// nothing is done to it by its pid (cancel, terminate): that pid may be running someone else's query.
import { connect as netConnect } from 'node:net';
import type pg from 'pg';

/** What pg's Client holds but its types do not declare: the cancel key the server (or the pooler) sent. */
interface CancelKey { processID: number | null; secretKey: number | null; host: string; port: number }
const keyOf = (client: pg.Client) => client as unknown as CancelKey;

/**
 * Whether `client` owns the server session whose pg_backend_pid() is `backendPid`: a direct connection
 * (or a plain TCP proxy) carries that backend's own cancel key; a pooler hands out keys of its own.
 */
export function ownsSession(client: pg.Client, backendPid: number): boolean {
  return keyOf(client).processID === backendPid;
}

/**
 * Asks the server to cancel what `client` is running: the protocol's CancelRequest, sent on a connection
 * of its own (no login, no privilege needed; a server accepts it whatever its pg_hba says). Through a
 * pooler it reaches the pooler, which passes it to the server session running `client`'s query, if any.
 * The other side closes the connection once it has handled the request; closing it first, as this did,
 * made pgbouncer 1.18 (Debian 12's) exit with "FATAL ... bad client state: 0" (pgbouncer issue #801).
 */
export function sendCancel(client: pg.Client): void {
  const { processID, secretKey, host, port } = keyOf(client);
  if (processID === null || secretKey === null) return;
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(80877102, 4);
  packet.writeInt32BE(processID, 8);
  packet.writeInt32BE(secretKey, 12);
  const socket = host.startsWith('/') ? netConnect(`${host}/.s.PGSQL.${port}`) : netConnect(port, host);
  socket.on('error', () => {});
  socket.setTimeout(10_000, () => socket.destroy());
  socket.on('connect', () => socket.write(packet));
  socket.on('data', () => {});
  socket.on('end', () => socket.destroy());
}
