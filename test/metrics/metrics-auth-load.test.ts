// `metrics --web-config-file` with basic auth while someone tries passwords: the authorized scraper,
// whose credentials passed once, is still served; the wrong attempts are refused (401), those beyond the
// bound at once (429); and the exporter still stops when told to. The wrong attempts' cost is
// bench/cases/12-scrape-under-auth-load.ts's; which attempts cost a check is test/unit/basic-auth.test.ts's.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, startCli } from '../helpers/cli.js';

const db = await freshDatabase('metrics_auth_load', { from: 'installed' });
const cli = builtCli();
const dir = mkdtempSync(join(tmpdir(), 'sc-auth-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

// Cost 10, as docs/security.md's htpasswd line makes: about 0.1 s a check here.
const config = join(dir, 'web.yml');
writeFileSync(config, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync('scrape-secret', 10)}'\n  grafana: '${bcrypt.hashSync('other-secret', 10)}'\n`);

interface Answer { status: number; retryAfter?: string; body: string }

/** One GET on a connection of its own, as a new client makes it. */
function get(url: string, pair: string, signal?: AbortSignal): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, signal, headers: { Authorization: `Basic ${Buffer.from(pair).toString('base64')}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c) => { body += c; })
        .on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body }));
    });
    req.on('error', reject).end();
  });
}

const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--web-config-file', config], { DATABASE_URL: db.url },
  (out) => out.match(/on (http:\/\/127\.0\.0\.1:\d+\/metrics)\n/)?.[1], children);
const url = started.value;

describe('basic auth under wrong-password load', () => {
  it('an authorized scrape is served within 3 s while 200 wrong passwords are tried 100 at a time', async () => {
    expect((await get(url, 'prometheus:scrape-secret')).status).toBe(200); // passes once, as Prometheus' first scrape
    let next = 0;
    const wrong: Answer[] = [];
    const load = Promise.all([...Array(100).keys()].map(async () => {
      while (next < 200) wrong.push(await get(url, `prometheus:wrong-${next++}`));
    }));
    await new Promise((resolve) => setTimeout(resolve, 100)); // the first hundred are on their way
    // Before the change, it waited for every wrong password's check: about 10 s on this machine.
    const scrape = await get(url, 'prometheus:scrape-secret', AbortSignal.timeout(3000));
    expect(scrape.status).toBe(200);
    expect(scrape.body).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
    await load;
    expect(wrong).toHaveLength(200);
    expect(new Set(wrong.map((a) => a.status))).toEqual(new Set([401, 429]));
    const busy = wrong.find((a) => a.status === 429)!;
    expect(busy.retryAfter).toBe('1');
    expect(busy.body).toBe('too many authentication attempts at once: try again\n');
  });

  it('once the attempts stop, a pair never seen is checked again: refused when wrong, served when right', async () => {
    expect((await get(url, 'grafana:wrong-again')).status).toBe(401);
    expect((await get(url, 'nobody:other-secret')).status).toBe(401);
    const right = await get(url, 'grafana:other-secret');
    expect(right.status).toBe(200);
    expect(right.body).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
  });

  it('stops on SIGTERM: the password-check thread does not keep it running', async () => {
    started.child.kill('SIGTERM');
    expect(await Promise.race([started.exited, new Promise((resolve) => setTimeout(resolve, 10_000, 'still running'))])).toBe(0);
  });
});
