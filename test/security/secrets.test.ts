// No password reaches a terminal, a log line or an HTTP response: the three URL shapes the old redaction
// missed (?password=, an empty user, an @ inside the password) on the CLI's error path, on the exporter's
// start line and log, and in /metrics during an outage; and scrubSecrets() on text of any origin.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { builtCli, runCli, startCli, exporterUrl } from '../helpers/cli.js';
import { redactUrl, scrubSecrets, rememberSecret } from '../../src/secrets.js';

const cli = builtCli();
const children: ChildProcess[] = [];
afterAll(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGKILL'); });

// Port 1 on loopback refuses: an outage that names the URL in its error.
const FORMS: Array<{ url: string; secrets: string[] }> = [
  { url: 'postgres://postgres@127.0.0.1:1/kandev?password=Qx7pw-query&sslmode=disable', secrets: ['Qx7pw-query'] },
  { url: 'postgres://:Qx7pw-emptyuser@127.0.0.1:1/kandev', secrets: ['Qx7pw-emptyuser'] },
  { url: 'postgres://kandev:Qx7pw@at-sign@127.0.0.1:1/kandev', secrets: ['Qx7pw@at-sign', 'Qx7pw', 'at-sign', 'Qx7pw%40at-sign'] },
];

const leaks = (text: string, secrets: string[]) => secrets.filter((s) => text.includes(s));

describe('passwords in connection URLs', () => {
  for (const { url, secrets } of FORMS) {
    it(`never shown: ${url.replace(/Qx7pw\S*?(?=@127|&|$)/, 'PASSWORD')}`, async () => {
      // The CLI's error path, given the URL as a flag and as DATABASE_URL.
      for (const [args, env] of [[['health', '--database-url', url], { DATABASE_URL: undefined }], [['health'], { DATABASE_URL: url }]] as const) {
        const r = await runCli(cli, [...args], env);
        expect(r.code).toBe(3);
        expect(r.stderr).toMatch(/^error: cannot reach the database \(postgres:\/\/.*\*\*\*.*ECONNREFUSED/);
        expect(leaks(r.stdout + r.stderr, secrets)).toEqual([]);
      }
      // The exporter's start line, a scrape during the outage, and its log of that outage.
      const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--database-url', url], {},
        exporterUrl, children);
      const body = await (await fetch(started.value)).text();
      expect(body).toMatch(/^subagent_context_up\{schema="public"\} 0$/m);
      expect(body).toMatch(/^# scrape error: cannot reach the database \(postgres:\/\/[^ ]*\*\*\*/m);
      await new Promise((r) => setTimeout(r, 200));
      expect(started.stderr()).toMatch(/scrape error/);
      started.child.kill('SIGTERM');
      await new Promise((r) => started.child.once('exit', r));
      const shown = started.stderr() + body;
      expect(leaks(shown, secrets), shown).toEqual([]);
      // --once, text and JSON.
      for (const json of [[], ['--json']]) {
        const once = await runCli(cli, ['metrics', '--once', ...json, '--database-url', url]);
        expect(once.code).toBe(3);
        expect(leaks(once.stdout + once.stderr, secrets)).toEqual([]);
      }
    });
  }
});

describe('redactUrl and scrubSecrets', () => {
  it('keep what identifies the database, hide what opens it', () => {
    expect(redactUrl('postgres://kandev:p%40ss@db.internal:6432/kandev?sslpassword=k3y&sslmode=require&application_name=x'))
      .toBe('postgres://kandev:***@db.internal:6432/kandev?sslpassword=***&sslmode=require&application_name=x');
    expect(redactUrl('postgres://:pw@db/kandev')).toBe('postgres://:***@db/kandev');
    expect(redactUrl('postgres://kandev@db/kandev')).toBe('postgres://kandev@db/kandev');
    // Not a URL at all: still no password.
    expect(redactUrl('postgres://u:sec ret@@h:x/db password=hunter2')).toBe('postgres://u:***@h:x/db password=***');
  });

  it('cuts every known secret out of text of any origin: URL passwords, PGPASSWORD, pgpass passwords', () => {
    const before = process.env.PGPASSWORD;
    process.env.PGPASSWORD = 'env-Zk93secret';
    try {
      rememberSecret('pgpass-Zk93secret');
      const text = scrubSecrets('failed for postgres://a:url-Zk93secret@h/db: saw env-Zk93secret and pgpass-Zk93secret and url-Zk93secret',
        'postgres://a:url-Zk93secret@h/db');
      expect(text).toBe('failed for postgres://a:***@h/db: saw *** and *** and ***');
      // A short password is cut where it stands alone, not out of every word.
      rememberSecret('pg');
      expect(scrubSecrets('pgbouncer said: pg')).toBe('pgbouncer said: ***');
    } finally {
      if (before === undefined) delete process.env.PGPASSWORD; else process.env.PGPASSWORD = before;
    }
  });
});
