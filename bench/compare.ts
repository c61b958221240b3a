// Combines benchmark runs: every target of the last N results files (default 2) with its value and
// spread over rounds in each run, the spread over all of them, and whether the runs give the same
// verdict. Exit status 1 when a target's verdict differs between the runs compared.
//
//   npm run build && node dist/bench/compare.js            # the last two full runs
//   node dist/bench/compare.js 3 --partial                 # the last three runs, quick and subset ones too
//   node dist/bench/compare.js bench/results/a.json bench/results/b.json
import { readdirSync, readFileSync } from 'node:fs';
import { join, basename } from 'node:path';
import { PACKAGE_ROOT } from '../src/paths.js';
import { show, spreadText, type Summary, type TargetResult, type Metrics } from './harness.js';

interface CaseResult { metrics?: Metrics; spread?: Record<string, Summary>; targets?: TargetResult[]; error?: string }
interface Run { file: string; date?: string; quick?: boolean; cases: Record<string, CaseResult> }

function load(file: string): Run {
  const r = JSON.parse(readFileSync(file, 'utf8'));
  return { file: basename(file), date: r.machine?.date, quick: r.machine?.quick, cases: r.cases ?? {} };
}

/** The newest `n` results files by name (names are their start times); full runs only unless `partial`. */
export function lastRuns(n: number, partial: boolean, dir = join(PACKAGE_ROOT, 'bench', 'results')): string[] {
  return readdirSync(dir).filter((f) => /^(partial-)?\d{4}-.*\.json$/.test(f) && (partial || !f.startsWith('partial-')))
    .sort((a, b) => a.replace(/^partial-/, '').localeCompare(b.replace(/^partial-/, '')))
    .slice(-n).map((f) => join(dir, f));
}

function main() {
  const args = process.argv.slice(2);
  const files = args.filter((a) => a.endsWith('.json'));
  const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 2);
  const runs = (files.length ? files : lastRuns(n, args.includes('--partial'))).map(load);
  if (runs.length === 0) { console.error('no results files'); process.exit(2); }
  console.log(`runs: ${runs.map((r, i) => `[${i + 1}] ${r.file}${r.quick ? ' (quick)' : ''}`).join('  ')}\n`);
  const targets = new Map<string, { t: TargetResult; per: (TargetResult & { spread?: Summary } | undefined)[] }>();
  runs.forEach((run, i) => {
    for (const [id, c] of Object.entries(run.cases)) {
      for (const t of c.targets ?? []) {
        const key = `${id} ${t.name}`;
        if (!targets.has(key)) targets.set(key, { t, per: runs.map(() => undefined) });
        targets.get(key)!.per[i] = { ...t, spread: c.spread?.[t.metric] };
      }
    }
  });
  let differ = 0;
  const rows: Record<string, Record<string, string>> = {};
  for (const [key, { t, per }] of targets) {
    const seen = per.filter((p) => p !== undefined);
    const verdicts = new Set(seen.map((p) => p!.met));
    const same = seen.length === runs.length && verdicts.size === 1;
    if (seen.length > 1 && verdicts.size > 1) differ++;
    const all = seen.flatMap((p) => p!.spread?.values ?? (typeof p!.value === 'number' ? [p!.value] : []));
    const row: Record<string, string> = { limit: `${t.comparator} ${t.limit}` };
    per.forEach((p, i) => {
      row[`[${i + 1}]`] = p ? `${show(p.value ?? NaN)}${p.spread ? ` ${spreadText(p.spread)}` : ''} ${p.met ? 'met' : 'MISSED'}` : '—';
    });
    row['all rounds'] = all.length > 1 ? `${show(Math.min(...all))}–${show(Math.max(...all))}` : '';
    row['same verdict'] = seen.length < runs.length ? 'not in every run' : same ? 'yes' : 'NO';
    rows[key] = row;
  }
  console.table(rows);
  console.log(`\n${targets.size} targets; ${differ} with a verdict that differs between runs`);
  if (differ > 0) process.exitCode = 1;
}

main();
