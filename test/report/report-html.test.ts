// `report --html FILE`: one self-contained page, opened in headless Chromium (Debian's package, driven by
// playwright-core; no browser is downloaded). Checks the rendered SVG charts and numbers, and that the
// page asks the network for nothing.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { freshDatabase } from '../helpers/database.js';
import { builtCli, runCli } from '../helpers/cli.js';
import { seedReportFixture } from '../helpers/report-fixture.js';
import { createTurn } from '../../kandev/host.js';

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
  const edges = await freshDatabase('report_html_edges', { from: 'installed' });
  const fanouts = await freshDatabase('report_html_fanouts', { from: 'installed' });
  const cli = builtCli();
  let dir = '';
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'subagent-context-html-'));
    await seedReportFixture(db);
  });
  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('keeps every chart label and value inside its chart and the page at 420 and 1280 px, the widest at the edges too', async () => {
    // The per-day chart's first and last bars carry its widest numbers: 10,965 on the first day, 21,600 on the last.
    const t = await createTurn(edges.pool, 'public', 'edges');
    await edges.query(`INSERT INTO task_session_subagents (id, task_session_id, task_id, tool_call_id, agent_execution_id, observed_at, updated_at)
      SELECT 'r' || d || '-' || n, $1, $2, 'c' || d || '-' || n, 'unknown', day, day
        FROM (VALUES (0, 10965), (44, 300), (89, 21600)) AS v(d, count),
             LATERAL (SELECT timestamp '2099-01-01' - (89 - d) * interval '1 day' AS day) AS x,
             generate_series(1, count) AS n`, [t.session, t.task]);
    const file = join(dir, 'edges.html');
    const r = await runCli(cli, ['report', '--html', file], { DATABASE_URL: edges.url });
    expect(r.code, r.stderr).toBe(0);
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    try {
      for (const width of [420, 1280]) {
        const page = await browser.newPage({ viewport: { width, height: 900 } });
        await page.goto(pathToFileURL(file).href);
        const out = await page.evaluate(() => {
          const page = document.documentElement.clientWidth;
          return [...document.querySelectorAll('svg.chart text')].filter((t) => getComputedStyle(t).display !== 'none').map((t) => {
            const b = t.getBoundingClientRect();
            const c = t.closest('svg')!.getBoundingClientRect();
            return { chart: t.closest('svg')!.id, text: t.textContent, left: b.left, right: b.right, chartLeft: c.left, chartRight: c.right, page };
          });
        });
        const trend = out.filter((t) => t.chart === 'chart-trend').map((t) => t.text);
        expect(trend, `the edge values are shown at ${width} px`).toEqual(expect.arrayContaining(['10,965', '21,600']));
        for (const t of out) {
          const where = `${t.chart} "${t.text}" at ${width} px: ${Math.round(t.left)}..${Math.round(t.right)} in ${Math.round(t.chartLeft)}..${Math.round(t.chartRight)}`;
          expect(t.left, where).toBeGreaterThanOrEqual(Math.max(0, t.chartLeft) - 0.5);
          expect(t.right, where).toBeLessThanOrEqual(Math.min(t.page, t.chartRight) + 0.5);
        }
        await page.close();
      }
    } finally {
      await browser.close();
    }
  });

  // On 4259581 the fan-out chart labelled 3 of these 9 bars at 1280 px and 2 at 420 px ("1 subagent", "5
  // subagents", "16 subagents"), the per-session chart hid the labels next to its first and last bar, and the
  // time span broke inside a timestamp at 420 px.
  it('labels every bar of the fan-out and per-session charts with its N and its value, at 420 and 1280 px', async () => {
    const FANOUT = [[1, 40], [2, 25], [3, 12], [4, 9], [5, 5], [6, 3], [8, 2], [10, 1], [16, 1]];
    const values = FANOUT.map(([n, turns]) => `(${n}, ${turns})`).join(', ');
    await fanouts.query(`
      INSERT INTO tasks (id, title, created_at, updated_at)
        SELECT 'task-' || n || '-' || g, 'card', now(), now() FROM (VALUES ${values}) f(n, turns), generate_series(1, turns) g;
      INSERT INTO task_sessions (id, task_id, started_at, updated_at)
        SELECT 'session-' || n || '-' || g, 'task-' || n || '-' || g, now(), now() FROM (VALUES ${values}) f(n, turns), generate_series(1, turns) g;
      INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at)
        SELECT 'turn-' || n || '-' || g, 'session-' || n || '-' || g, 'task-' || n || '-' || g, now(), now(), now()
          FROM (VALUES ${values}) f(n, turns), generate_series(1, turns) g;
      INSERT INTO task_session_subagents (id, task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, observed_at, updated_at)
        SELECT 'r' || n || '-' || g || '-' || k, 'session-' || n || '-' || g, 'task-' || n || '-' || g, 'turn-' || n || '-' || g,
               'c' || n || '-' || g || '-' || k, 'unknown', now() - g * interval '1 hour', now()
          FROM (VALUES ${values}) f(n, turns), generate_series(1, turns) g, generate_series(1, n) k;`);
    const file = join(dir, 'fanouts.html');
    const r = await runCli(cli, ['report', '--html', file], { DATABASE_URL: fanouts.url });
    expect(r.code, r.stderr).toBe(0);
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    try {
      for (const width of [420, 1280]) {
        const page = await browser.newPage({ viewport: { width, height: 900 } });
        await page.goto(pathToFileURL(file).href);
        for (const chart of ['chart-fanout', 'chart-per-session']) {
          const shown = await page.$$eval(`#${chart} g.bar`, (gs) => gs.map((g) => [...g.querySelectorAll('text')]
            .filter((t) => getComputedStyle(t).display !== 'none')
            .map((t) => ({ kind: t.classList.contains('value') ? 'value' : 'label', text: t.textContent }))));
          expect(shown, `${chart} at ${width} px`).toEqual(FANOUT.map(([n, turns]) =>
            [{ kind: 'value', text: String(turns) }, { kind: 'label', text: String(n) }]));
          // No two labels overlap.
          const boxes = await page.$$eval(`#${chart} text.label`, (ts) => ts.map((t) => t.getBoundingClientRect()).map((b) => [b.left, b.right]));
          for (let i = 1; i < boxes.length; i++) expect(boxes[i]![0], `${chart} label ${i} at ${width} px`).toBeGreaterThan(boxes[i - 1]![1]);
        }
        // Each timestamp of the time span on one line.
        const stamps = await page.$$eval('#span .stamp', (ss) => ss.map((s) => s.getClientRects().length));
        expect(stamps.length).toBe(2);
        expect(stamps, `the time span at ${width} px`).toEqual([1, 1]);
        await page.screenshot({ path: join(dir, `fanouts-${width}.png`), fullPage: true });
        await page.close();
      }
    } finally {
      await browser.close();
    }
  });

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
        { label: '1 subagent', value: '2', shown: '2' }, { label: '2 subagents', value: '1', shown: '1' }, { label: '4 subagents', value: '1', shown: '1' }]);
      // Heights in proportion to the counts (the chart scales with the page's width).
      expect(bars[0].height).toBeGreaterThan(100);
      expect(Math.abs(bars[0].height - 2 * bars[1].height)).toBeLessThanOrEqual(1);

      const perSession = await page.$$eval('#chart-per-session g.bar', (gs) => gs.map((g) => [g.getAttribute('data-label'), g.getAttribute('data-value')]));
      expect(perSession).toEqual([['0', '1'], ['1', '1'], ['3', '1'], ['4', '1']]);
      const usage = await page.$$eval('#chart-usage-by-type g.usage', (gs) => gs.map((g) =>
        [g.getAttribute('data-label'), g.getAttribute('data-reported'), g.getAttribute('data-not-reported')]));
      expect(usage).toEqual([['Explore', '2', '3'], ['general', '0', '2'], ['(not reported)', '1', '0']]);
      const status = await page.$$eval('#chart-agent-status g.bar', (gs) => gs.map((g) => [g.getAttribute('data-label'), g.getAttribute('data-value')]));
      expect(status).toEqual([['async_launched', '3'], ['completed', '3'], ['(absent)', '1'], ['started', '1']]);
      // Every chart is laid out with a size.
      const sizes = await page.$$eval('svg.chart', (svgs) => svgs.map((s) => s.getBoundingClientRect().width));
      expect(sizes.length).toBeGreaterThanOrEqual(5);
      for (const w of sizes) expect(w).toBeGreaterThan(200);

      const cell = (table: string, key: string) =>
        page.$eval(`#${table} td[data-key="${key}"]`, (td) => td.textContent);
      expect(await cell('cards', 'sessions per card (what kandev shows)')).toBe('1.33');
      expect(await cell('cards', 'subagents per card')).toBe('2.67');
      expect(await cell('cards', 'model contexts per card (sessions + subagents)')).toBe('4.00');
      expect(await cell('overview', 'usage not reported')).toBe('5');
      expect(await cell('settlement', 'still running (not settled)')).toBe('2');
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

  it('fits 420 px and uses 1280 px, with a banner on a shortfall (screenshots kept)', async () => {
    // One subagent row lost: the shortfall the banner must shout about.
    const [{ n }] = (await db.query(`WITH gone AS (DELETE FROM public.task_session_subagents
        WHERE (task_session_id, tool_call_id) IN (SELECT task_session_id, tool_call_id FROM public.task_session_subagents
                                                   WHERE source = 'live' ORDER BY id LIMIT 1) RETURNING 1)
      SELECT count(*)::int AS n FROM gone`)).rows;
    expect(n).toBe(1);
    const file = join(dir, 'shortfall.html');
    const r = await runCli(cli, ['report', '--html', file], { DATABASE_URL: db.url });
    expect(r.code).toBe(0);
    const shots = process.env.SUBAGENT_CONTEXT_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'subagent-context-screens-'));
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    try {
      for (const width of [420, 1280]) {
        const page = await browser.newPage({ viewport: { width, height: 900 } });
        await page.goto(pathToFileURL(file).href);
        const layout = await page.evaluate(() => {
          const doc = document.documentElement;
          const banner = document.querySelector('#status-banner');
          const charts = [...document.querySelectorAll('svg.chart')].map((c) => c.getBoundingClientRect().width);
          // A model name laid out on more than one line would be taller than one line of its cell.
          const names = [...document.querySelectorAll('#by-model td.name')].map((td) => {
            const range = document.createRange(); range.selectNodeContents(td);
            return range.getClientRects().length;
          });
          // The chart labels the reader sees: their size on the screen, and whether two overlap.
          const shown = (e: Element) => getComputedStyle(e).display !== 'none';
          const labels = [...document.querySelectorAll('svg.chart text.label')].filter(shown).map((t) => {
            const b = t.getBoundingClientRect();
            return { chart: t.closest('svg')!.id, text: t.textContent, height: b.height, left: b.left, right: b.right,
              fontPx: parseFloat(getComputedStyle(t).fontSize) };
          });
          // A table wider than its box: the box scrolls, and a visible line says so.
          const visible = (e: Element | null) => !!e && shown(e) && getComputedStyle(e).visibility === 'visible' && e.getBoundingClientRect().height > 0;
          const boxes = [...document.querySelectorAll('.scroll')].map((box) => ({ table: box.querySelector('table')!.id,
            cut: box.scrollWidth > box.clientWidth + 1,
            hint: box.nextElementSibling?.classList.contains('scroll-hint') && visible(box.nextElementSibling) ? box.nextElementSibling.textContent : null }));
          const cut = boxes.filter((b) => b.cut);
          // And no such line under a table that is not cut.
          const falseHints = boxes.filter((b) => !b.cut && b.hint).map((b) => b.table);
          // Every table and chart under a heading of its own section.
          const unheaded = [...document.querySelectorAll('table, svg.chart')].filter((e) => {
            const heading = e.closest('section')?.querySelector('h2, h3');
            return !heading || !heading.textContent!.trim();
          }).map((e) => e.id);
          return {
            scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth,
            banner: banner ? { text: banner.textContent, background: getComputedStyle(banner).backgroundColor } : null,
            widestChart: Math.max(...charts), names, labels, cut, falseHints, unheaded,
            running: document.querySelector('#running-section h3')?.textContent,
            trendHeading: document.querySelector('#trend h2')?.textContent,
            trendDays: [...document.querySelectorAll('#chart-trend g.bar')].map((g) => g.getAttribute('data-label')),
          };
        });
        await page.screenshot({ path: join(shots, `report-${width}.png`), fullPage: true });
        expect(layout.scrollWidth, `horizontal overflow at ${width} px`).toBeLessThanOrEqual(layout.clientWidth);
        expect(layout.banner?.text).toMatch(/^shortfall/);
        expect(layout.banner?.background).not.toMatch(/^rgba?\(0, 0, 0(, 0)?\)$/);  // coloured, not transparent
        expect(layout.names.every((lines) => lines === 1), `model names wrapped at ${width} px`).toBe(true);
        // The widest chart takes most of the page at either width, not a fixed 560 px island.
        expect(layout.widestChart / layout.clientWidth).toBeGreaterThan(0.8);
        // Chart labels are text of 12 CSS px at any width (they were scaled to ~3 px at 420 px), and the
        // labels of one chart do not overlap.
        expect(layout.labels.length).toBeGreaterThanOrEqual(8);
        for (const l of layout.labels) {
          expect(l.fontPx, `${l.chart} "${l.text}" at ${width} px`).toBe(12);
          expect(l.height, `${l.chart} "${l.text}" at ${width} px`).toBeGreaterThanOrEqual(12);
        }
        for (const chart of new Set(layout.labels.map((l) => l.chart))) {
          const ls = layout.labels.filter((l) => l.chart === chart).sort((a, b) => a.left - b.left);
          for (let i = 1; i < ls.length; i++) expect(ls[i].left, `${chart}: "${ls[i - 1].text}" and "${ls[i].text}" overlap at ${width} px`).toBeGreaterThanOrEqual(ls[i - 1].right);
        }
        // The trend shows the days its heading names: the first and last day drawn, both labelled.
        expect(layout.trendDays).toHaveLength(90);
        expect(layout.trendHeading).toBe(`Subagents per day (UTC), ${layout.trendDays[0]} to ${layout.trendDays.at(-1)}`);
        expect(layout.labels.filter((l) => l.chart === 'chart-trend').map((l) => l.text)).toEqual(expect.arrayContaining([layout.trendDays[0], layout.trendDays.at(-1)]));
        // A table cut by its box says that it scrolls (at 420 px the wide ones are); at 1280 px none is cut.
        for (const c of layout.cut) expect(c.hint, `table ${c.table} is cut at ${width} px without a word`).toMatch(/scroll it sideways/);
        if (width === 420) expect(layout.cut.map((c) => c.table)).toEqual(expect.arrayContaining(['by-model', 'by-subagent-type']));
        else expect(layout.cut).toEqual([]);
        expect(layout.falseHints, `"scroll sideways" under tables that fit at ${width} px`).toEqual([]);
        expect(layout.unheaded, `tables and charts without a heading at ${width} px`).toEqual([]);
        expect(layout.running).toBe('Still running, oldest first');
        await page.close();
      }
      console.log(`report screenshots: ${shots}`);
    } finally {
      await browser.close();
    }
  });
});
