// A TCP proxy between a process under test and PostgreSQL, to make connection faults on purpose: cut every
// connection now, refuse new ones, or swallow traffic without closing (a network that went silent).
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** Where clients connect: 127.0.0.1:port. */
  port: number;
  /** Connections open through the proxy right now. */
  open(): number;
  /** Destroys every open connection, both sides, as a dropped network link does. */
  cut(): void;
  /** Stops listening (new connections are refused) and cuts the open ones. */
  refuse(): Promise<void>;
  /** Keeps connections open but forwards nothing more, either way. */
  blackhole(): void;
  /** Back to forwarding; listening again on the same port if it was refusing. */
  heal(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let silent = false;
  let port = 0;
  const listen = (server: Server) => new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => { port = (server.address() as { port: number }).port; resolve(); });
  });
  const make = () => createServer((client) => {
    const upstream = connect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => { pairs.delete(pair); client.destroy(); upstream.destroy(); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (d) => { if (!silent) upstream.write(d); });
    upstream.on('data', (d) => { if (!silent) client.write(d); });
  });
  let server: Server | null = make();
  await listen(server);
  const cut = () => { for (const [a, b] of pairs) { a.destroy(); b.destroy(); } pairs.clear(); };
  const stop = async () => {
    const s = server;
    server = null;
    cut();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  return {
    get port() { return port; },
    open: () => pairs.size,
    cut,
    refuse: stop,
    blackhole: () => { silent = true; },
    async heal() {
      silent = false;
      if (!server) { server = make(); await listen(server); }
    },
    close: stop,
  };
}
