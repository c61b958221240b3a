// `report --html FILE`: one self-contained page, opened in headless Chromium (Debian's package, driven by
// playwright-core; no browser is downloaded). Checks the rendered SVG charts and numbers, and that the
// page asks the network for nothing.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { freshDatabase } from './helpers/database.js';
import { builtCli, runCli } from './helpers/cli.js';
import { seedReportFixture } from './helpers/report-fixture.js';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const present = existsSync(CHROMIUM);
// In CI the browser is installed by .ci/run, so its absence there is a failure, never a skip.
if (!present && !process.env.CI) {
  console.warn(`report-html.test.ts skipped: ${CHROMIUM} is absent (apt-get install chromium). In CI this test runs.`);
}

const runs = present || !!process.env.CI;

describe.skipIf(!runs)('report --html in headless Chromium', async () => {
  // A skipped suite's body still runs at collection but its hooks never do: a database made here
  // then would never be dropped.
  if (!runs) return;
  const db = await freshDatabase('report_html');
  const cli = builtCli();
  let dir = '';
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'subagent-context-html-'));
    await seedReportFixture(db);
  });
  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('renders the charts and the numbers, offline', async () => {
    const file = join(dir, 'report.html');
    const r = await runCli(cli, ['report', '--html', file], { DATABASE_URL: db.url });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe(`wrote the HTML report to ${file}`);
    const html = readFileSync(file, 'utf8');
    expect(html).not.toMatch(/<script|<link|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);

    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    try {
      const page = await browser.newPage();
      const requests: string[] = [];
      page.on('request', (req) => requests.push(req.url()));
      await page.goto(pathToFileURL(file).href);

      // Fan-out per turn: three bars (fan-out 1, 2, 4) with their counts, drawn with a real height.
      const bars = await page.$$eval('#chart-fanout g.bar', (gs) => gs.map((g) => {
        const rect = g.querySelector('rect')!.getBoundingClientRect();
        return { label: g.getAttribute('data-label'), value: g.getAttribute('data-value'),
          shown: g.querySelector('text.value')!.textContent, height: Math.round(rect.height) };
      }));
      expect(bars.map(({ label, value, shown }) => ({ label, value, shown }))).toEqual([
        { label: '1', value: '2', shown: '2' }, { label: '2', value: '1', shown: '1' }, { label: '4', value: '1', shown: '1' }]);
      expect(bars[0].height).toBe(160);
      expect(bars[1].height).toBe(80);

      const perSession = await page.$$eval('#chart-per-session g.bar', (gs) => gs.map((g) => [g.getAttribute('data-label'), g.getAttribute('data-value')]));
      expect(perSession).toEqual([['0', '1'], ['1', '1'], ['3', '1'], ['4', '1']]);
      const usage = await page.$$eval('#chart-usage-by-type g.usage', (gs) => gs.map((g) =>
        [g.getAttribute('data-label'), g.getAttribute('data-reported'), g.getAttribute('data-not-reported')]));
      expect(usage).toEqual([['Explore', '2', '3'], ['general', '0', '2'], ['(not reported)', '1', '0']]);
      const status = await page.$$eval('#chart-agent-status g.bar', (gs) => gs.map((g) => [g.getAttribute('data-label'), g.getAttribute('data-value')]));
      expect(status).toEqual([['async_launched', '3'], ['completed', '3'], ['(absent)', '1'], ['started', '1']]);
      // Every chart is laid out with a size.
      const sizes = await page.$$eval('svg.chart', (svgs) => svgs.map((s) => s.getBoundingClientRect().width));
      expect(sizes).toEqual([560, 560, 560, 560]);

      const cell = (table: string, key: string) =>
        page.$eval(`#${table} td[data-key="${key}"]`, (td) => td.textContent);
      expect(await cell('cards', 'sessions per card (what kandev shows)')).toBe('1.33');
      expect(await cell('cards', 'subagents per card')).toBe('2.67');
      expect(await cell('cards', 'model contexts per card')).toBe('4.00');
      expect(await cell('overview', 'usage not reported')).toBe('5');
      expect(await cell('settlement', 'outstanding')).toBe('2');
      expect(await page.textContent('#health-status')).toBe('healthy');

      const rows = await page.$$eval('#by-model tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      expect(rows).toEqual([
        ['(not reported)', '5', '3', '0', '5', 'unknown', 'unknown', 'unknown', 'unknown', 'unknown', 'unknown'],
        ['m1', '2', '0', '2', '0', '4,000', '2,000', '3,000', '3.0 s', '4.0 s', '2.5'],
        ['m2', '1', '0', '1', '0', '500', '500', '500', 'unknown', 'unknown', '0.0'],
      ]);
      // Unknown cells are styled apart from numbers.
      expect(await page.$$eval('#by-model td.unknown', (tds) => tds.length)).toBe(8);
      expect(requests).toEqual([pathToFileURL(file).href]);
    } finally {
      await browser.close();
    }
  });
});
