// Prometheus' HTTP API answers loosely shaped JSON; the assertions below are its shape check.
/* eslint-disable @typescript-eslint/no-explicit-any */
// The shipped Prometheus alerting rules (alerts/subagent-context.rules.yml), checked and unit-tested by
// Debian's promtool, and the exporter scraped by the real `prometheus` binary on loopback with those
// rules loaded. CI installs the `prometheus` package (.ci/run); without it these tests skip and say why.
import { afterAll, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { builtCli } from '../helpers/cli.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { seedReportFixture } from '../helpers/report-fixture.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { blocksUnder } from '../helpers/doc-blocks.js';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

const which = (name: string) => ['/usr/bin', '/usr/local/bin', '/bin'].map((d) => join(d, name)).find(existsSync);
const promtool = which('promtool');
const prometheus = which('prometheus');
if (!promtool) console.warn('alerts.test.ts: promtool not found (apt-get install prometheus): skipping the rule checks');
if (!prometheus) console.warn('alerts.test.ts: prometheus not found (apt-get install prometheus): skipping the live scrape');

const RULES = join(PACKAGE_ROOT, 'alerts', 'subagent-context.rules.yml');
const RULE_TESTS = join(PACKAGE_ROOT, 'test', 'alerts', 'subagent-context.rules.test.yml');

function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => execFile(cmd, args, { cwd: PACKAGE_ROOT, timeout: 60_000 }, (err, stdout, stderr) =>
    resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: stdout + stderr })));
}

describe.skipIf(!promtool)('promtool', () => {
  it('check rules: the shipped file is valid and holds every alert', async () => {
    const r = await run(promtool!, ['check', 'rules', RULES]);
    console.log(r.out.trim());
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('SUCCESS: 13 rules found');
  });

  it('test rules: each alert is quiet when healthy and fires after its `for`', async () => {
    const r = await run(promtool!, ['test', 'rules', RULE_TESTS]);
    console.log(r.out.trim());
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS/);
  });

  it('every alert of the rules file has a unit test', async () => {
    const { readFileSync } = await import('node:fs');
    const alerts = [...readFileSync(RULES, 'utf8').matchAll(/^\s+- alert: (\w+)$/gm)].map((m) => m[1]);
    const tests = readFileSync(RULE_TESTS, 'utf8');
    expect(alerts).toHaveLength(13);
    for (const a of alerts) expect(tests, a).toMatch(new RegExp(`alertname: ${a}\\n\\s+exp_alerts:\\n\\s+- exp_labels`));
  });
});

const freePort = () => new Promise<number>((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const port = (s.address() as { port: number }).port;
    s.close(() => resolve(port));
  });
});

describe.skipIf(!prometheus)('the real prometheus scrapes `metrics --listen`', async () => {
  // A skipped suite's body still runs at collection but its hooks never do: a database made here
  // then would never be dropped.
  if (!prometheus) return;
  const db = await freshDatabase('alerts');
  await seedReportFixture(db);
  await db.createHost('bare'); // kandev's tables, nothing installed
  await db.createHost('old');
  await installRelease(RELEASES.find((r) => r.version === '0.1.0')!, db.url, 'old');
  const cli = builtCli();
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'sc-prometheus-'));
  afterAll(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('gets every series, healthy, with the rules loaded; a disabled trigger turns its alert pending', async () => {
    const exporterPort = await freePort();
    const exporter = spawn(process.execPath, [cli, 'metrics', '--listen', `127.0.0.1:${exporterPort}`, '--database-url', db.url],
      { cwd: PACKAGE_ROOT, stdio: 'ignore' });
    children.push(exporter);
    // One exporter per installation (schema), as docs/dashboards.md sets them up: nothing installed, and 0.1.0.
    const others = await Promise.all(['bare', 'old'].map(async (schema) => {
      const port = await freePort();
      children.push(spawn(process.execPath, [cli, 'metrics', '--listen', `127.0.0.1:${port}`, '--database-url', db.url, '--schema', schema],
        { cwd: PACKAGE_ROOT, stdio: 'ignore' }));
      return `127.0.0.1:${port}`;
    }));
    const promPort = await freePort();
    // docs/dashboards.md's configuration, as a reader copies it: its rules path and targets made this run's.
    const [documented] = blocksUnder('dashboards.md', 'Prometheus');
    const config = parseYaml(documented!.text);
    expect(config.rule_files).toEqual(['node_modules/subagent-context/alerts/subagent-context.rules.yml']);
    config.rule_files = [RULES];
    config.scrape_configs[0].static_configs[0].targets = [`127.0.0.1:${exporterPort}`, ...others];
    writeFileSync(join(dir, 'prometheus.yml'), stringifyYaml({ global: { scrape_interval: '1s', evaluation_interval: '1s' }, ...config }));
    const prom = spawn(prometheus!, [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`], { stdio: 'ignore' });
    children.push(prom);
    // Bounded: the whole exchange stops after 45 s whatever happens; afterAll kills both processes.
    const deadline = Date.now() + 45_000;
    const api = async (path: string) => {
      for (;;) {
        try {
          const res = await fetch(`http://127.0.0.1:${promPort}${path}`);
          if (res.ok) return (await res.json()) as any;
        } catch { /* not up yet */ }
        if (Date.now() > deadline) throw new Error(`prometheus did not answer ${path} in time`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    const until = async <T>(path: string, pick: (body: any) => T | undefined): Promise<T> => {
      for (;;) {
        const got = pick(await api(path));
        if (got !== undefined) return got;
        if (Date.now() > deadline) throw new Error(`no answer for ${path} in time`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    const q = (expr: string) => `/api/v1/query?query=${encodeURIComponent(expr)}`;

    const target = await until('/api/v1/targets', (b) => b.data.activeTargets.find((t: any) => t.health === 'up'));
    expect(target.labels.job).toBe('subagent-context');
    const status = await until(q('subagent_context_status{schema="public"} == 1'), (b) => b.data.result[0]);
    expect(status.metric).toMatchObject({ schema: 'public', status: 'healthy', job: 'subagent-context' });
    const names = await until(q('{job="subagent-context",__name__=~"subagent_context_.*"}'),
      (b) => (b.data.result.length >= 20 ? b.data.result.map((r: any) => r.metric.__name__) : undefined));
    for (const n of ['subagent_context_up', 'subagent_context_shortfall', 'subagent_context_last_subagent_message_timestamp_seconds',
      'subagent_context_persisted_total', 'subagent_context_info']) expect(names).toContain(n);
    const groups = await until('/api/v1/rules', (b) => (b.data.groups.length ? b.data.groups : undefined));
    expect(groups[0].rules.map((r: any) => r.name)).toHaveLength(13);
    expect(groups[0].rules.every((r: any) => r.health === 'ok'), JSON.stringify(groups[0].rules.map((r: any) => r.lastError))).toBe(true);

    // The database answers for every schema: no "unreachable"; nothing installed is the trigger alert, and
    // 0.1.0 asks for the upgrade.
    const up = await until(q('subagent_context_up'), (b) => (b.data.result.length === 3 ? b.data.result : undefined));
    expect(up.map((r: any) => [r.metric.schema, r.value[1]]).sort()).toEqual([['bare', '1'], ['old', '1'], ['public', '1']]);
    const firing = (name: string, schema: string) => (b: any) =>
      b.data.alerts.find((a: any) => a.labels.alertname === name && a.labels.schema === schema);
    expect(await until('/api/v1/alerts', firing('SubagentContextTriggerMissing', 'bare')))
      .toMatchObject({ state: 'pending', labels: { status: 'not_installed', severity: 'critical' } });
    expect(await until('/api/v1/alerts', firing('SubagentContextUpgradeRequired', 'old')))
      .toMatchObject({ state: 'pending', labels: { installed_version: '0.1.0', severity: 'warning' } });
    const alerts = (await api('/api/v1/alerts')).data.alerts.map((a: any) => a.labels.alertname);
    expect(alerts).not.toContain('SubagentContextDatabaseUnreachable');

    await db.query('ALTER TABLE task_session_messages DISABLE TRIGGER subagent_context_capture');
    try {
      const alert = await until('/api/v1/alerts', (b) => b.data.alerts.find((a: any) => a.labels.alertname === 'SubagentContextTriggerDisabled'));
      expect(alert).toMatchObject({ state: 'pending', labels: { schema: 'public', status: 'trigger_disabled', severity: 'critical' } });
    } finally {
      await db.query('ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture');
    }
    prom.kill('SIGTERM');
    exporter.kill('SIGTERM');
  }, 90_000);
});
