// The HTTP(S) endpoint: GET /metrics serves the shared evaluation (single-flight.ts) in the Prometheus text
// format. It listens at once: the database is first read by the first scrape, so a slow or absent database
// never keeps the exporter from starting (Prometheus then sees subagent_context_up 0 and why).
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { isIP } from 'node:net';
import { redact } from '../db.js';
import { UserError } from '../errors.js';
import { scrubSecrets } from '../secrets.js';
import { Evaluator, type Evaluation, type EvaluationTarget } from './evaluate.js';
import { SharedEvaluation } from './single-flight.js';
import { formatMetrics } from './format.js';
import { afterEvaluation } from './after-evaluation.js';
import { loadWebConfig } from './web-config.js';
import { basicAuth } from './basic-auth.js';

export interface ServeOptions extends EvaluationTarget {
  listen: string;
  /** How long a finished evaluation is served again, in ms. */
  cacheMs: number;
  /** --web-config-file, if given. */
  webConfigFile?: string;
}

export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new UserError(`--listen must be HOST:PORT (e.g. 127.0.0.1:9811 or [::1]:9811), got "${value}".`);
  }
  return { host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

const isLoopback = (host: string) => host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));

/**
 * Runs the after-evaluation step in the background, one at a time: an evaluation that finishes while the
 * previous step still runs gets none (the next one will). Its errors go to stderr, scrubbed.
 */
function afterEvaluationRunner(target: EvaluationTarget, signal: AbortSignal) {
  let running: Promise<void> | null = null;
  return {
    start(evaluation: Evaluation) {
      if (running || signal.aborted) return;
      running = afterEvaluation(evaluation, { ...target, signal })
        .then(() => undefined)
        .catch((err: unknown) => console.error(`after evaluation: ${scrubSecrets(String((err as Error)?.message ?? err), target.databaseUrl)}`))
        .finally(() => { running = null; });
    },
    done: () => running ?? Promise.resolve(),
  };
}

/** Logs a scrape error when it starts or changes, and the recovery: a log line per outage, not per scrape. */
function outageLogger() {
  let last: string | undefined;
  return (e: Evaluation) => {
    const now = e.up ? undefined : e.error ?? 'down';
    if (now !== last) console.error(now === undefined ? 'scrapes answer again (subagent_context_up 1)' : `scrape error (subagent_context_up 0): ${now}`);
    last = now;
  };
}

export async function serveMetrics(opts: ServeOptions): Promise<number> {
  const { host, port } = parseListen(opts.listen);
  const web = opts.webConfigFile ? loadWebConfig(opts.webConfigFile) : { tls: null, users: null };
  const authorized = web.users ? basicAuth(web.users) : null;
  const stopping = new AbortController();
  const after = afterEvaluationRunner(opts, stopping.signal);
  const logOutage = outageLogger();
  const evaluator = new Evaluator(opts);
  const shared = new SharedEvaluation((signal) => evaluator.evaluate(signal), opts.cacheMs, (e) => { logOutage(e); after.start(e); });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const verdict = authorized ? await authorized(req.headers.authorization) : 'passed';
    if (verdict === 'refused') {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="subagent-context metrics", charset="UTF-8"', 'Content-Type': 'text/plain; charset=utf-8' })
        .end('authentication required\n');
      return;
    }
    if (verdict === 'busy') { // credentials not seen before, while too many others wait to be checked
      res.writeHead(429, { 'Retry-After': '1', 'Content-Type': 'text/plain; charset=utf-8' }).end('too many authentication attempts at once: try again\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') { res.writeHead(405, { Allow: 'GET, HEAD' }).end(); return; }
    if (path === '/') { res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('subagent-context metrics: see /metrics\n'); return; }
    if (path !== '/metrics') { res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found: see /metrics\n'); return; }
    // The client leaving before the answer (Prometheus' scrape_timeout, a curl interrupted) withdraws it
    // from the evaluation; the evaluation is cancelled when no scrape waits for it any more.
    const gone = new AbortController();
    res.once('close', () => { if (!res.writableFinished) gone.abort(); });
    let evaluation: Evaluation;
    try {
      evaluation = await shared.get(gone.signal);
    } catch {
      return; // nobody to answer
    }
    const body = formatMetrics(opts.schema, evaluation);
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : body);
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => { handle(req, res).catch(() => res.destroy()); };
  const server: Server = web.tls ? createHttpsServer(web.tls, onRequest) : createHttpServer(onRequest);
  // A TLS handshake that fails (a plain-HTTP client, a client certificate refused) concerns that client only.
  server.on('tlsClientError', (_err, socket) => socket.destroy());
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new UserError(`cannot listen on ${opts.listen}: ${err.code ?? err.message}. Pick a free port with --listen HOST:PORT.`)));
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const shown = typeof addr === 'object' && addr ? `${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}` : opts.listen;
  console.log(`serving metrics for schema "${opts.schema}" of ${redact(opts.databaseUrl)} on ${web.tls ? 'https' : 'http'}://${shown}/metrics`);
  if (!isLoopback(host) && !web.users && !web.tls) {
    console.error(`warning: listening on ${shown} without --web-config-file: anyone who can reach this port reads the ` +
      'metrics (schema, versions, counts, the database host in a scrape error) and can make it query the database. See docs/security.md.');
  }
  await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
  stopping.abort();
  shared.cancel();
  server.closeIdleConnections();
  await new Promise<void>((resolve) => { server.close(() => resolve()); setTimeout(() => { server.closeAllConnections(); resolve(); }, 2000).unref(); });
  await after.done();
  await evaluator.close();
  return 0;
}
