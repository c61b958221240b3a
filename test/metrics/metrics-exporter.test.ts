// The exporter never piles up work on the database (docs/dashboards.md, "metrics"): concurrent scrapes
// share one evaluation, a result is reused for --cache-seconds, every query stops at --timeout-seconds,
// a scrape whose client left leaves no query running, and it listens before reading the database at all.
// "Slow" is made real: another session holds an ACCESS EXCLUSIVE lock on task_session_subagents, which
// health reads, so the exporter's query waits in PostgreSQL exactly as it would behind a long one.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { freshDatabase, holdSubagentTableLock } from '../helpers/database.js';
import { builtCli, startCli, exporterUrl } from '../helpers/cli.js';

/** A scrape's text without the evaluation's age, the one line that moves while an answer is reused. */
const ageless = (text: string) => text.replace(/^subagent_context_evaluation_age_seconds\{[^\n]*\n/m, '');

const db = await freshDatabase('metrics_exporter', { from: 'installed' });
const cli = builtCli();
const children: ChildProcess[] = [];
afterAll(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGKILL'); });

const upOf = (text: string) => Number(/^subagent_context_up\{[^}]*\} (\d)$/m.exec(text)?.[1]);
const valueOf = (text: string, name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1]);
const scrape = async (url: string, init?: RequestInit) => (await fetch(url, init)).text();

async function exporter(args: string[]) {
  const started = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', ...args], { DATABASE_URL: db.url },
    exporterUrl, children);
  return { ...started, url: started.value };
}

const holdLock = () => holdSubagentTableLock(db);

/** The exporter's sessions running a query now (idle ones between evaluations do not count). */
async function exporterQueries(): Promise<number> {
  const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
                                    AND application_name = 'subagent-context metrics' AND state <> 'idle'`);
  return rows[0].n;
}

async function until(what: string, check: () => Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('metrics --listen under load', () => {
  it('20 concurrent scrapes run one evaluation, and all get its answer', async () => {
    const { child, url } = await exporter(['--cache-seconds', '0', '--timeout-seconds', '30']);
    const release = await holdLock();
    let most = 0;
    let answers: string[];
    try {
      const pending = Promise.all(Array.from({ length: 20 }, () => scrape(url)));
      await until('the evaluation to wait on the lock', async () => (await exporterQueries()) > 0);
      // Over a second of sampling while all 20 wait: never more than one query of ours in the database.
      for (let i = 0; i < 20; i++) {
        most = Math.max(most, await exporterQueries());
        await new Promise((r) => setTimeout(r, 50));
      }
      await release();
      answers = await pending;
    } finally {
      await release().catch(() => {});
    }
    expect(most).toBe(1);
    expect(answers.map(upOf)).toEqual(Array(20).fill(1));
    expect(new Set(answers.map(ageless)).size, 'one evaluation: the same answer, byte for byte but its age').toBe(1);
    child.kill('SIGTERM');
  });

  it('reuses an answer for --cache-seconds, then reads the database again', async () => {
    // 5 s: a loaded machine may take a second or two between the two scrapes, and the second must still
    // fall within the cache time.
    const { child, url } = await exporter(['--cache-seconds', '5']);
    const first = await scrape(url);
    expect(valueOf(first, 'subagent_context_trigger_enabled')).toBe(1);
    await db.query('ALTER TABLE task_session_messages DISABLE TRIGGER subagent_context_capture');
    try {
      const started = Date.now();
      const again = await scrape(url);
      expect(Date.now() - started).toBeLessThan(2000);
      expect(ageless(again), 'within the cache time: the same answer, but its age').toBe(ageless(first));
      await new Promise((r) => setTimeout(r, 5100));
      expect(valueOf(await scrape(url), 'subagent_context_trigger_enabled'), 'after it: read afresh').toBe(0);
    } finally {
      await db.query('ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture');
    }
    child.kill('SIGTERM');
  });

  it('a health query slower than --timeout-seconds is cancelled by statement_timeout: up 0, quickly', async () => {
    const { child, url } = await exporter(['--cache-seconds', '0', '--timeout-seconds', '1']);
    const release = await holdLock();
    try {
      const started = Date.now();
      const text = await scrape(url);
      const took = Date.now() - started;
      expect(upOf(text)).toBe(0);
      expect(text).toMatch(/^# scrape error: the database answered, but health took longer than 1 s \(--timeout-seconds\) and was cancelled by statement_timeout; held up by pid \d+ /m);
      expect(took).toBeGreaterThanOrEqual(900);
      expect(took).toBeLessThan(4000);  // about the timeout, with a loaded machine's slack: never the lock's holding
      await until('nothing of ours left running', async () => (await exporterQueries()) === 0, 2000);
    } finally {
      await release();
    }
    expect(upOf(await scrape(url))).toBe(1);
    child.kill('SIGTERM');
  });

  it('a scrape whose client went away leaves no query running', async () => {
    const { child, url } = await exporter(['--cache-seconds', '0', '--timeout-seconds', '60']);
    const release = await holdLock();
    try {
      const clients = Array.from({ length: 3 }, () => new AbortController());
      const pending = clients.map((c) => scrape(url, { signal: c.signal }).catch(() => 'aborted'));
      await until('the evaluation to wait on the lock', async () => (await exporterQueries()) === 1);
      clients[0].abort();
      clients[1].abort();
      await new Promise((r) => setTimeout(r, 500));
      expect(await exporterQueries(), 'one client still waits: the query goes on').toBe(1);
      const left = Date.now();
      clients[2].abort();
      await until('the query to be cancelled', async () => (await exporterQueries()) === 0, 3000);
      expect(Date.now() - left).toBeLessThan(2000);
      expect(await Promise.all(pending)).toEqual(['aborted', 'aborted', 'aborted']);
    } finally {
      await release();
    }
    expect(upOf(await scrape(url)), 'and the next scrape starts afresh').toBe(1);
    child.kill('SIGTERM');
  });

  it('listens at once, without reading health first; the first scrape does', async () => {
    const release = await holdLock();
    try {
      const started = Date.now();
      const { child, url } = await exporter(['--timeout-seconds', '1']);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(await exporterQueries(), 'no query before the first scrape').toBe(0);
      expect(upOf(await scrape(url))).toBe(0);
      child.kill('SIGTERM');
    } finally {
      await release();
    }
  });

  it('still refuses a URL that cannot work, at once', async () => {
    const { runCli } = await import('../helpers/cli.js');
    const r = await runCli(cli, ['metrics', '--database-url', 'mysql://u:secretpw@h/db']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^error: --database-url \/ DATABASE_URL must be a URL like postgres:/);
    expect(r.stderr).not.toContain('secretpw');
  });
});
