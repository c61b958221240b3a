// The shipped alert rules judged on real exporter output by Debian's promtool: a rule unit test built from
// a `metrics --once` scrape repeated every minute. promtool reports a firing alert as a failed expectation
// of "no alert", on its stdout and stderr; both are captured here and read, never printed into the test run.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Debian's promtool (the `prometheus` package), when installed. */
export const PROMTOOL = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find(existsSync);

/**
 * The alerts of `rulesFile` that fire after `minutes` of scrapes that all read `metrics` (the Prometheus text
 * format), with the exporter's own `up{job="subagent-context"}` at 1.
 */
export function firingAlerts(rulesFile: string, metrics: string, minutes = 60): string[] {
  if (!PROMTOOL) throw new Error('promtool is not installed (apt-get install prometheus)');
  const series = metrics.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => {
    const at = l.lastIndexOf(' ');
    return { series: l.slice(0, at), values: `${l.slice(at + 1)}+0x${minutes}` };
  });
  const names = [...execFileSync('grep', ['-o', 'alert: \\w*', rulesFile], { encoding: 'utf8' }).matchAll(/alert: (\w+)/g)].map((m) => m[1]!);
  const dir = mkdtempSync(join(tmpdir(), 'sc-rules-'));
  const file = join(dir, 'rules.test.yml');
  writeFileSync(file, JSON.stringify({
    rule_files: [rulesFile],
    evaluation_interval: '1m',
    tests: [{
      interval: '1m',
      input_series: [...series, { series: 'up{job="subagent-context"}', values: `1+0x${minutes}` }],
      alert_rule_test: names.map((alertname) => ({ eval_time: `${minutes}m`, alertname, exp_alerts: [] })),
    }],
  }));
  try {
    execFileSync(PROMTOOL, ['test', 'rules', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return [];
  } catch (err) {
    const out = String((err as { stdout?: string }).stdout ?? '') + String((err as { stderr?: string }).stderr ?? '');
    const fired = [...new Set([...out.matchAll(/alertname: (\w+)/g)].map((m) => m[1]!))];
    if (fired.length === 0) throw new Error(`promtool test rules failed without naming an alert:\n${out}`, { cause: err });
    return fired;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
