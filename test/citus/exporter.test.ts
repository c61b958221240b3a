// The exporter on Citus (docs/citus.md, docs/dashboards.md "metrics"): `metrics --once` and a running
// `metrics --listen` on the coordinator answer (subagent_context_up 1), say healthy, and serve every series
// that the same store serves on plain tables, with the same values where they do not depend on the clock.
// The plain store is built on the suite's server by the same writes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { freshCitusDatabase } from '../helpers/citus.js';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, exporterUrl, runCli, startCli } from '../helpers/cli.js';
import { afterActivation, writeSubagentCalls } from '../../kandev/subagent-calls.js';
import type { Queryable } from '../../kandev/host.js';
import { METRICS } from '../../src/metrics/format.js';

const citus = await freshCitusDatabase('exporter', 'citus/exporter.test.ts');
const plain = citus ? await freshDatabase('citus_exporter_plain', { from: 'host' }) : null;
const cli = builtCli();
const children: ChildProcess[] = [];
afterAll(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGKILL'); });

/** The exposition's samples: series (name and labels) → value. */
function samples(text: string): Map<string, string> {
  return new Map(text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => {
    const at = l.lastIndexOf(' ');
    return [l.slice(0, at), l.slice(at + 1)];
  }));
}

/** History before `up`, `up`, calls since activation, and a complete reconciliation: every series has a value. */
async function store(q: Queryable, install: () => Promise<unknown>, url: string) {
  await writeSubagentCalls(q, 'public', { calls: 60, sessions: 6, prefix: 'h', base: '2026-08-01 10:00:00' });
  await install();
  await writeSubagentCalls(q, 'public', { calls: 30, sessions: 6, prefix: 'l', base: await afterActivation(q, 'public'), step: '1 millisecond' });
  const full = await runCli(cli, ['health', '--full', '--database-url', url]);
  expect(full.code, full.stdout + full.stderr).toBe(0);
}

describe.skipIf(!citus)('metrics on a Citus coordinator', () => {
  let reference: Map<string, string>;

  beforeAll(async () => {
    await citus!.createHost();
    await store(await citus!.connect(), () => citus!.up(), citus!.url);
    await store(plain!.pool, () => plain!.up(), plain!.url);
    const once = await runCli(cli, ['metrics', '--once', '--database-url', plain!.url]);
    expect(once.code, once.stderr).toBe(0);
    reference = samples(once.stdout);
    // The plain store serves every metric there is, so "the same series" below leaves none out.
    expect(new Set([...reference.keys()].map((k) => k.split('{')[0]))).toEqual(new Set(METRICS.map((m) => m.name)));
  }, 300_000);

  /** What a scrape must show: up, healthy, and the plain store's series, equal where the clock plays no part. */
  function expectAsOnPlainTables(text: string) {
    expect(text).not.toMatch(/^# scrape error/m);
    const got = samples(text);
    expect(got.get('subagent_context_up{schema="public"}')).toBe('1');
    expect(got.get('subagent_context_status{schema="public",status="healthy"}')).toBe('1');
    expect([...got.keys()].sort()).toEqual([...reference.keys()].sort());
    const timeless = (m: Map<string, string>) => [...m].filter(([k]) => !/_timestamp_seconds\{|_evaluation_(age_)?seconds\{/.test(k)).sort();
    expect(timeless(got)).toEqual(timeless(reference));
  }

  it('metrics --once: up 1, healthy, every series of plain tables', async () => {
    const r = await runCli(cli, ['metrics', '--once', '--database-url', citus!.url]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expectAsOnPlainTables(r.stdout);
  });

  it('a running exporter (metrics --listen) serves the same', async () => {
    const { child, value: url } = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', '--cache-seconds', '0'],
      { DATABASE_URL: citus!.url }, exporterUrl, children);
    try {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expectAsOnPlainTables(await response.text());
    } finally {
      child.kill('SIGTERM');
    }
  });
});
