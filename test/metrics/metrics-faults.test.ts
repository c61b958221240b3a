// The exporter survives every connection fault and says so with subagent_context_up 0, then recovers: a
// refused connection, the server ending its backend, the link cut (a real TCP proxy) while a scrape runs,
// and a link gone silent. Before the fix, a cut mid-scrape killed the process ("Unhandled 'error' event …
// Connection terminated unexpectedly": a pooled client checked out had no 'error' listener).
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { freshDatabase, holdSubagentTableLock } from '../helpers/database.js';
import { builtCli, startCli, exporterUrl } from '../helpers/cli.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const db = await freshDatabase('metrics_faults', { from: 'installed' });
const target = new URL(db.url);
const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
const viaProxy = new URL(db.url);
viaProxy.hostname = '127.0.0.1';
viaProxy.port = String(proxy.port);
const cli = builtCli();
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await proxy.close();
});

const upOf = (text: string) => Number(/^subagent_context_up\{[^}]*\} (\d)$/m.exec(text)?.[1]);
const scrape = async (url: string) => (await fetch(url)).text();

/** The exporter, through the proxy, serving fresh evaluations (no cache: each scrape shows the fault). */
async function exporter(extra: string[] = []) {
  const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--cache-seconds', '0', ...extra],
    { DATABASE_URL: viaProxy.toString() }, exporterUrl, children);
  return { ...started, url: started.value };
}

const holdLock = () => holdSubagentTableLock(db);

/** The exporter's backends waiting on that lock, once there is one. */
async function scrapeWaiting(): Promise<number[]> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await db.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()
                                      AND application_name = 'subagent-context metrics' AND wait_event_type = 'Lock'`);
    if (rows.length > 0) return rows.map((r) => r.pid as number);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no scrape waited on the lock');
}

async function stillAlive(child: ChildProcess, stderr: () => string) {
  await new Promise((r) => setTimeout(r, 300));
  expect(child.exitCode, stderr()).toBe(null);
  expect(stderr()).not.toMatch(/Unhandled|at .*node_modules/);
}

describe('connection faults: up 0, the exporter lives on, and the next scrape after the fault is up 1', () => {
  it('the link cut while a scrape runs', async () => {
    const { child, url, stderr } = await exporter();
    expect(upOf(await scrape(url))).toBe(1);
    for (let round = 0; round < 3; round++) {
      const release = await holdLock();
      try {
        const pending = scrape(url);
        await scrapeWaiting();
        proxy.cut();
        const text = await pending;
        expect(upOf(text)).toBe(0);
        expect(text).toMatch(/^# scrape error: .*(terminated|ECONNRESET|closed)/m);
      } finally {
        await release();
      }
      await stillAlive(child, stderr);
      expect(upOf(await scrape(url))).toBe(1);
    }
    child.kill('SIGTERM');
  });

  it('pg_terminate_backend of the scrape\'s session', async () => {
    const { child, url, stderr } = await exporter();
    const release = await holdLock();
    try {
      const pending = scrape(url);
      const [pid] = await scrapeWaiting();
      await db.query('SELECT pg_terminate_backend($1)', [pid]);
      const text = await pending;
      expect(upOf(text)).toBe(0);
      expect(text).toMatch(/^# scrape error: .*terminat/m);
    } finally {
      await release();
    }
    await stillAlive(child, stderr);
    expect(upOf(await scrape(url))).toBe(1);
    child.kill('SIGTERM');
  });

  it('the connection kept between scrapes, ended by the server or cut while idle: the next scrape opens another, up 1', async () => {
    const { child, url, stderr } = await exporter();
    expect(upOf(await scrape(url))).toBe(1);
    const idle = async () => (await db.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()
                                              AND application_name = 'subagent-context metrics' AND state = 'idle'`)).rows.map((r) => r.pid as number);
    const [pid] = await idle();
    expect(pid, 'one connection kept between scrapes').toBeDefined();
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    await new Promise((r) => setTimeout(r, 200));
    expect(upOf(await scrape(url))).toBe(1);
    const [next] = await idle();
    expect(next).not.toBe(pid);
    proxy.cut();
    await new Promise((r) => setTimeout(r, 200));
    expect(upOf(await scrape(url))).toBe(1);
    await stillAlive(child, stderr);
    child.kill('SIGTERM');
  });

  it('refused connections, from the start on: it starts anyway, serves up 0 with the reason, and up 1 once the server is back', async () => {
    await proxy.refuse();
    try {
      const { child, url, stderr } = await exporter();
      const text = await scrape(url);
      expect(upOf(text)).toBe(0);
      expect(text).toMatch(/^# scrape error: cannot reach the database \(postgres:\/\/.*ECONNREFUSED/m);
      await stillAlive(child, stderr);
      await proxy.heal();
      expect(upOf(await scrape(url))).toBe(1);
      child.kill('SIGTERM');
    } finally {
      await proxy.heal();
    }
  });

  it('a link gone silent mid-scrape: up 0 within the timeout, not never', async () => {
    const { child, url, stderr } = await exporter(['--timeout-seconds', '2']);
    expect(upOf(await scrape(url))).toBe(1);
    const release = await holdLock();
    try {
      const started = Date.now();
      const pending = scrape(url);
      await scrapeWaiting();
      proxy.blackhole();
      const text = await pending;
      expect(upOf(text)).toBe(0);
      expect(Date.now() - started).toBeLessThan(4500);
      expect(text).toMatch(/^# scrape error: the database did not answer within 2 s/m);
    } finally {
      await release();
      proxy.cut();
      await proxy.heal();
    }
    await stillAlive(child, stderr);
    expect(upOf(await scrape(url))).toBe(1);
    child.kill('SIGTERM');
  });
});
