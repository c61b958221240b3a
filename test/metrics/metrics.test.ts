// `subagent-context metrics`: the built CLI serves health and capture counters in the Prometheus text
// format; the output is read with a Prometheus text-format parser and checked line by line.
import { describe, it, expect, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli, startCli, exporterUrl } from '../helpers/cli.js';
import { seedReportFixture } from '../helpers/report-fixture.js';
import { PACKAGE_VERSION } from '#sql';
import { STATUS_VALUES, METRICS } from '../../src/metrics/format.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { sqlFile } from '#sql';

const db = await freshDatabase('metrics');
const seeded = await seedReportFixture(db);
await db.createHost('pending');
await db.install('pending'); // installed, never activated
await db.createHost('doomed');
await db.up('doomed');
await db.createHost('bare'); // kandev's tables, nothing of ours
await db.createHost('removed');
await db.up('removed');
await db.createHost('orphan');
await db.up('orphan');
await db.query(sqlFile('code/drop-code.sql', 'orphan')); // the code gone, the trigger left (a hand-made removal cut short)
await db.createHost('old');
await installRelease(RELEASES.find((r) => r.version === '0.1.0')!, db.url, 'old');
await db.createHost('previous');
await installRelease(RELEASES.find((r) => r.version === '0.2.0')!, db.url, 'previous');
const cli = builtCli();
const env = { DATABASE_URL: db.url };

type Family = { name: string; help: string; type: string; metrics: Array<{ value: string; labels?: Record<string, string> }> };

/** Parses with the library, and also holds the text to the format's grammar, line by line. */
function parse(text: string): Map<string, Family> {
  expect(text.endsWith('\n')).toBe(true);
  const seen = new Set<string>();
  let declared: string | undefined;
  for (const line of text.trimEnd().split('\n')) {
    let m: RegExpMatchArray | null;
    if ((m = line.match(/^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*$/))) {
      expect(seen.has(m[1]), `${m[1]} declared once`).toBe(false);
      seen.add(m[1]);
      declared = m[1];
    } else if ((m = line.match(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter)$/))) {
      expect(m[1]).toBe(declared);
      expect(m[2] === 'counter').toBe(m[1].endsWith('_total'));
    } else if ((m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)\{schema="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-z_]+="(?:[^"\\\n]|\\[\\"n])*")*\} (-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)$/))) {
      expect(m[1]).toBe(declared);
    } else {
      expect(line, 'a line of the Prometheus text format').toMatch(/^# scrape error: /);
    }
  }
  const families = parsePrometheusTextFormat(text) as Family[];
  return new Map(families.map((f) => [f.name, f]));
}

/** The status label of the one subagent_context_status series at 1; every status value has a series. */
function statusOf(families: Map<string, Family>): string {
  const f = families.get('subagent_context_status')!;
  expect(f.metrics.map((x) => x.labels!.status).sort()).toEqual([...STATUS_VALUES].sort());
  const current = f.metrics.filter((x) => Number(x.value) === 1);
  expect(current).toHaveLength(1);
  expect(f.metrics.filter((x) => Number(x.value) === 0)).toHaveLength(STATUS_VALUES.length - 1);
  return current[0].labels!.status;
}

function value(families: Map<string, Family>, name: string): number | undefined {
  const f = families.get(name);
  if (!f) return undefined;
  expect(f.metrics).toHaveLength(1);
  return Number(f.metrics[0].value);
}

const children: ChildProcess[] = [];
afterAll(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGKILL'); });

/** Starts `metrics --listen 127.0.0.1:0` and returns its /metrics URL, as printed on stdout. */
async function serve(args: string[]): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null> }> {
  const { child, exited, value: url } = await startCli(cli, ['metrics', '--listen', '127.0.0.1:0', ...args], env,
    exporterUrl, children);
  return { child, url, exited };
}

describe('metrics --listen', () => {
  it('serves health gauges and capture counters that match the database', async () => {
    const { child, url, exited } = await serve(['--cache-seconds', '0']);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const m = parse(await res.text());
    expect(m.get('subagent_context_shortfall')!.type).toBe('GAUGE');
    expect(m.get('subagent_context_attempted_total')!.type).toBe('COUNTER');
    expect(m.get('subagent_context_shortfall')!.metrics[0].labels).toEqual({ schema: 'public' });
    const capture = (await db.query(`SELECT extract(epoch FROM subagent_context_parse_key(value))::float8 AS s
                                       FROM kandev_meta WHERE key = 'subagent_context_capture_since'`)).rows[0].s;
    // `up` completes a reconciliation: when it started is health's reconciled_at.
    const reconciled = (await db.query(`SELECT extract(epoch FROM reconciled_at)::float8 AS s FROM subagent_context_health()`)).rows[0].s;
    expect(reconciled).toEqual(expect.any(Number));
    // health's verdict, one series per status value; the exporter's and the installation's versions.
    expect(statusOf(m)).toEqual('healthy');
    expect(m.get('subagent_context_info')!.metrics[0].labels).toEqual({
      schema: 'public', installed_version: expect.stringMatching(/^\d+\.\d+\.\d+/), package_version: PACKAGE_VERSION });
    m.delete('subagent_context_status');
    m.delete('subagent_context_info');
    const lastMessage = Number((await db.query(`SELECT extract(epoch FROM max(created_at))::float8 AS s FROM task_session_messages
                                                 WHERE metadata LIKE '%subagent_task%' AND created_at >= '2099-01-01'`)).rows[0].s);
    expect(Object.fromEntries([...m.keys()].map((k) => [k, value(m, k)]))).toEqual({
      subagent_context_up: 1,
      subagent_context_slow: 0,
      subagent_context_evaluation_seconds: expect.any(Number),
      subagent_context_evaluation_age_seconds: expect.any(Number),
      subagent_context_permission_denied: 0,
      subagent_context_upgrade_required: 0,
      subagent_context_activated: 1,
      subagent_context_trigger_installed: 1,
      subagent_context_trigger_enabled: 1,
      subagent_context_shortfall: 0,
      subagent_context_excess: 0,
      subagent_context_uncompared: 0,
      subagent_context_last_observed_timestamp_seconds: Date.UTC(2099, 0, 1, 0, 0, 9) / 1000,
      subagent_context_last_subagent_message_timestamp_seconds: lastMessage,
      subagent_context_reconciled_timestamp_seconds: reconciled,
      subagent_context_capture_since_timestamp_seconds: capture,
      subagent_context_failures: 0,
      subagent_context_collisions: 0,
      subagent_context_attempted_total: seeded.liveQualifyingWrites,
      subagent_context_skipped_no_identity_total: 0,
      subagent_context_persisted_total: seeded.liveQualifyingWrites,
      subagent_context_failed_total: 0,
      subagent_context_anomalous_value_total: 0,
      subagent_context_unknown_execution_total: seeded.liveQualifyingWrites,
    });

    // A missed subagent (written with capture disabled) shows on the next scrape; counters do not move.
    await db.query('ALTER TABLE task_session_messages DISABLE TRIGGER subagent_context_capture');
    await db.query(`INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, type, metadata, created_at, updated_at)
                    VALUES ('m-missed', 'session-b1', 'task-b', 'b1t1', '', 'tool_call',
                            '{"tool_call_id":"missed","normalized":{"kind":"subagent_task"}}', '2099-01-01 00:00:30', '2099-01-01 00:00:30')`);
    const after = parse(await (await fetch(url)).text());
    expect(value(after, 'subagent_context_trigger_enabled')).toBe(0);
    expect(value(after, 'subagent_context_shortfall')).toBe(1);
    expect(statusOf(after), 'the SQL verdict: a disabled trigger comes before the shortfall').toBe('trigger_disabled');
    expect(value(after, 'subagent_context_last_subagent_message_timestamp_seconds')).toBe(Date.UTC(2099, 0, 1, 0, 0, 30) / 1000);
    expect(value(after, 'subagent_context_attempted_total')).toBe(seeded.liveQualifyingWrites);
    await db.query('ALTER TABLE task_session_messages ENABLE TRIGGER subagent_context_capture');

    expect((await fetch(url.replace('/metrics', '/other'))).status).toBe(404);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('reports up 0, with the reason as a comment, when a scrape fails', async () => {
    const { child, url, exited } = await serve(['--schema', 'doomed', '--cache-seconds', '0']);
    expect(value(parse(await (await fetch(url)).text()), 'subagent_context_up')).toBe(1);
    await db.query('DROP SCHEMA doomed CASCADE');
    const text = await (await fetch(url)).text();
    const m = parse(text);
    // Only what is known: how long the failed evaluation took and how old it is, beside up 0.
    expect([...m.keys()]).toEqual(['subagent_context_up', 'subagent_context_evaluation_seconds', 'subagent_context_evaluation_age_seconds']);
    expect(value(m, 'subagent_context_up')).toBe(0);
    expect(text).toMatch(/^# scrape error: schema "doomed" not found\. Pass the schema that holds kandev's tables with --schema\.$/m);
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  });
});

describe('metrics --once', () => {
  it('before activation leaves the unknown shortfall out instead of reporting 0', async () => {
    const r = await runCli(cli, ['metrics', '--once', '--schema', 'pending'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const m = parse(r.stdout);
    expect(value(m, 'subagent_context_activated')).toBe(0);
    expect(statusOf(m)).toBe('not_activated');
    expect(value(m, 'subagent_context_trigger_enabled')).toBe(1);
    expect(value(m, 'subagent_context_collisions')).toBe(0);
    for (const unknown of ['shortfall', 'excess', 'failures', 'last_observed_timestamp_seconds', 'capture_since_timestamp_seconds',
      'last_subagent_message_timestamp_seconds']) {
      expect(m.has(`subagent_context_${unknown}`), unknown).toBe(false);
    }
    expect(m.get('subagent_context_pending')).toBeUndefined();
    expect(m.get('subagent_context_shortfall')).toBeUndefined();
    expect(m.get('subagent_context_activated')!.metrics[0].labels).toEqual({ schema: 'pending' });
  });

  it('refuses a bad --listen and an uninstalled schema with one sentence each', async () => {
    const bad = await runCli(cli, ['metrics', '--listen', 'localhost'], env);
    expect(bad.code).toBe(3);
    expect(bad.stderr.trim()).toBe('error: --listen must be HOST:PORT (e.g. 127.0.0.1:9811 or [::1]:9811), got "localhost".');
    const missing = await runCli(cli, ['metrics', '--once', '--schema', 'nowhere'], env);
    expect(missing.code).toBe(3);
    expect(missing.stderr.trim()).toBe('error: schema "nowhere" not found. Pass the schema that holds kandev\'s tables with --schema.');
  });
});

describe('a database that answers is up, whatever is installed', () => {
  const once = async (schema: string) => {
    const r = await runCli(cli, ['metrics', '--once', '--schema', schema], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return parse(r.stdout);
  };

  it('before `up`: not_installed, up 1, no upgrade series', async () => {
    const m = await once('bare');
    expect(value(m, 'subagent_context_up')).toBe(1);
    expect(statusOf(m)).toBe('not_installed');
    expect(value(m, 'subagent_context_trigger_installed')).toBe(0);
    expect(m.get('subagent_context_info')!.metrics[0].labels).toEqual({ schema: 'bare', installed_version: '', package_version: PACKAGE_VERSION });
    expect(m.has('subagent_context_upgrade_required')).toBe(false);
    expect(m.has('subagent_context_shortfall')).toBe(false);
  });

  it('after `uninstall`: not_installed, up 1', async () => {
    const r = await runCli(cli, ['uninstall', '--schema', 'removed'], env);
    expect(r.code, r.stderr).toBe(0);
    const m = await once('removed');
    expect(value(m, 'subagent_context_up')).toBe(1);
    expect(statusOf(m)).toBe('not_installed');
  });

  it('the trigger left without its code: trigger_orphaned, up 1', async () => {
    const m = await once('orphan');
    expect(value(m, 'subagent_context_up')).toBe(1);
    expect(statusOf(m)).toBe('trigger_orphaned');
    expect(value(m, 'subagent_context_trigger_installed')).toBe(1);
  });

  it('0.1.0 still installed: up 1, upgrade required, its version in the info labels, no verdict it cannot give', async () => {
    const m = await once('old');
    expect(value(m, 'subagent_context_up')).toBe(1);
    expect(value(m, 'subagent_context_upgrade_required')).toBe(1);
    expect(m.get('subagent_context_info')!.metrics[0].labels).toEqual({ schema: 'old', installed_version: '0.1.0', package_version: PACKAGE_VERSION });
    expect(m.has('subagent_context_status')).toBe(false);
    expect(m.has('subagent_context_shortfall')).toBe(false);
  });

  it("0.2.0 installed: up 1, the upgrade is asked for, and 0.2.0's own verdict is served (docs/upgrade.md#the-upgrade-window)", async () => {
    const m = await once('previous');
    expect(value(m, 'subagent_context_up')).toBe(1);
    expect(value(m, 'subagent_context_upgrade_required')).toBe(1);
    expect(m.get('subagent_context_info')!.metrics[0].labels!.installed_version).toBe('0.2.0');
    expect(m.has('subagent_context_status')).toBe(true);
    expect(m.has('subagent_context_shortfall')).toBe(true);
  });

  it('the release installed now is not an upgrade', async () => {
    expect(value(await once('public'), 'subagent_context_upgrade_required')).toBe(0);
  });
});

describe('metrics --once --json', () => {
  it('prints one JSON object with the values of the text format', async () => {
    const [text, json] = await Promise.all([runCli(cli, ['metrics', '--once'], env), runCli(cli, ['metrics', '--once', '--json'], env)]);
    expect(json.code, json.stderr).toBe(0);
    const o = JSON.parse(json.stdout) as Record<string, unknown>;
    const m = parse(text.stdout);
    expect(o.schema).toBe('public');
    expect(o.error).toBeNull();
    expect(o.subagent_context_status).toBe(statusOf(m));
    expect(o.subagent_context_info).toEqual({ installed_version: m.get('subagent_context_info')!.metrics[0].labels!.installed_version, package_version: PACKAGE_VERSION });
    for (const def of METRICS) {
      if (def.name === 'subagent_context_status' || def.name === 'subagent_context_info') continue;
      // Two evaluations, two timings: present in both, equal in neither.
      if (def.name === 'subagent_context_evaluation_seconds' || def.name === 'subagent_context_evaluation_age_seconds') {
        expect(o[def.name], def.name).toEqual(expect.any(Number));
        continue;
      }
      expect(o[def.name], def.name).toBe(m.has(def.name) ? value(m, def.name) : null);
    }
    expect(Object.keys(o)).toEqual(['schema', ...METRICS.map((d) => d.name), 'error']);
  });

  it('before activation: the unknown values are null; when the database cannot be read: up 0, the error, exit 3', async () => {
    const pending = JSON.parse((await runCli(cli, ['metrics', '--once', '--json', '--schema', 'pending'], env)).stdout);
    expect(pending).toMatchObject({ subagent_context_status: 'not_activated', subagent_context_shortfall: null, subagent_context_activated: 0 });
    const down = await runCli(cli, ['metrics', '--once', '--json', '--schema', 'nowhere'], env);
    expect(down.code).toBe(3);
    expect(JSON.parse(down.stdout)).toMatchObject({ subagent_context_up: 0, subagent_context_status: null,
      error: 'schema "nowhere" not found. Pass the schema that holds kandev\'s tables with --schema.' });
  });

  it('--json without --once is refused', async () => {
    const r = await runCli(cli, ['metrics', '--json'], env);
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe('error: --json goes with --once (a scrape is always the Prometheus text format).');
  });
});

describe('metrics --help', () => {
  it('lists every metric the exporter can serve', async () => {
    const help = (await runCli(cli, ['metrics', '--help'])).stdout;
    for (const m of METRICS) expect(help).toMatch(new RegExp(`^  ${m.name} +${m.type}$`, 'm'));
    // and every metric a scrape serves is in that list
    const served = parse((await runCli(cli, ['metrics', '--once'], env)).stdout);
    for (const name of served.keys()) expect(METRICS.map((m) => m.name)).toContain(name);
  });
});
