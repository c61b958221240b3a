// `metrics --web-config-file`: TLS and basic auth in the Prometheus exporter toolkit's format, with a
// self-signed certificate made here by openssl and bcrypt hashes; and what --help and the start line say
// about listening beyond loopback.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli, startCli } from '../helpers/cli.js';

const db = await freshDatabase('metrics_web', { from: 'installed' });
const cli = builtCli();
const env = { DATABASE_URL: db.url };
const dir = mkdtempSync(join(tmpdir(), 'sc-web-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
const ca = readFileSync(join(dir, 'cert.pem'));
// htpasswd -B writes $2y$ hashes; bcrypt's 2b and 2y are the same algorithm.
const hash = bcrypt.hashSync('s3cret: with colon', 4).replace(/^\$2b\$/, '$2y$');

function writeConfig(name: string, lines: string[]): string {
  const file = join(dir, name);
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** GET over HTTPS trusting only the test's certificate. */
function get(url: string, auth?: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: auth ? { Authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c) => { body += c; }).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject).end();
  });
}

async function exporter(args: string[], scheme = 'https') {
  const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', ...args], env,
    (out) => out.match(new RegExp(`on (${scheme}://127\\.0\\.0\\.1:\\d+/metrics)\\n`))?.[1], children);
  return { ...started, url: started.value };
}

describe('metrics --web-config-file', () => {
  it('TLS with basic auth: 401 without or with wrong credentials, 200 with them; plain HTTP gets nothing', async () => {
    const config = writeConfig('web.yml', [
      'tls_server_config:', '  cert_file: cert.pem', '  key_file: key.pem', // relative to the file, as the toolkit reads them
      'basic_auth_users:', `  prometheus: '${hash}'`,
    ]);
    const { child, url } = await exporter(['--web-config-file', config]);
    const none = await get(url);
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm=/);
    expect(none.body).not.toMatch(/subagent_context/);
    expect((await get(url, 'prometheus:wrong')).status).toBe(401);
    expect((await get(url, 'nobody:s3cret: with colon')).status).toBe(401);
    for (let i = 0; i < 2; i++) { // the second one from the remembered check
      const ok = await get(url, 'prometheus:s3cret: with colon');
      expect(ok.status).toBe(200);
      expect(ok.body).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
    }
    const root = await get(url.replace('/metrics', '/'), 'prometheus:s3cret: with colon');
    expect(root.status).toBe(200);
    await expect(fetch(url.replace('https:', 'http:'))).rejects.toThrow();
    child.kill('SIGTERM');
  });

  it('TLS alone serves without asking for credentials', async () => {
    const config = writeConfig('tls-only.yml', ['tls_server_config:', `  cert_file: ${join(dir, 'cert.pem')}`, `  key_file: ${join(dir, 'key.pem')}`]);
    const { child, url } = await exporter(['--web-config-file', config]);
    const res = await get(url);
    expect(res.status).toBe(200);
    expect(res.body).toMatch(/^subagent_context_up\{schema="public"\} 1$/m);
    child.kill('SIGTERM');
  });

  it('basic auth alone, over HTTP', async () => {
    const config = writeConfig('auth-only.yml', ['basic_auth_users:', `  prometheus: '${hash}'`]);
    const { child, url } = await exporter(['--web-config-file', config], 'http');
    expect((await fetch(url)).status).toBe(401);
    const ok = await fetch(url, { headers: { Authorization: `Basic ${Buffer.from('prometheus:s3cret: with colon').toString('base64')}` } });
    expect(ok.status).toBe(200);
    child.kill('SIGTERM');
  });

  it('refuses, in one sentence, a password where a hash belongs, a setting it does not apply, and a missing file', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['basic_auth_users:', '  prometheus: plaintext'], /basic_auth_users\.prometheus must be a bcrypt hash .*not a password\.$/],
      [['http_server_config:', '  http2: true'], /http_server_config is not supported by subagent-context metrics .*remove it\.$/],
      [['tls_server_config:', '  cert_file: nope.pem', '  key_file: key.pem'], /tls_server_config\.cert_file: cannot read .*nope\.pem \(ENOENT\)\.$/],
      [['tls_server_config:', '  cert_file: cert.pem', '  key_file: key.pem', '  cipher_suites: [TLS_AES_128_GCM_SHA256]'], /tls_server_config\.cipher_suites is not supported/],
    ];
    for (const [i, [lines, message]] of cases.entries()) {
      const r = await runCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--web-config-file', writeConfig(`bad${i}.yml`, lines)], env);
      expect(r.code, r.stderr).toBe(3);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr.trim()).toMatch(message);
    }
  });
});

describe('listening beyond loopback', () => {
  it('--help shows it only with a web config file; the start line warns when there is none', async () => {
    const help = (await runCli(cli, ['metrics', '--help'])).stdout;
    const wide = help.split('\n').filter((l) => /--listen 0\.0\.0\.0/.test(l));
    expect(wide.length).toBeGreaterThan(0);
    for (const line of wide) expect(line).toContain('--web-config-file');
    const started = await startCli(cli, ['metrics', '--listen', '0.0.0.0:0'], env, (out) => out.match(/on http:\/\/0\.0\.0\.0:\d+\/metrics\n/)?.[0], children);
    await new Promise((r) => setTimeout(r, 300));
    expect(started.stderr()).toMatch(/^warning: listening on 0\.0\.0\.0:\d+ without --web-config-file: anyone who can reach this port reads the metrics .*See docs\/security\.md\.$/m);
    started.child.kill('SIGTERM');
    const local = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0'], env, (out) => out.match(/on http:\/\/127\.0\.0\.1:\d+\/metrics\n/)?.[0], children);
    await new Promise((r) => setTimeout(r, 300));
    expect(local.stderr()).toBe('');
    local.child.kill('SIGTERM');
  });
});
