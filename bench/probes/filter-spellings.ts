// Probe: the cost of candidate spellings of capture's textual filter (the trigger's WHEN clause, the
// health index predicate, subagent_context_may_qualify) on the metadata kandev actually writes (Go-encoded,
// 0.3-20 KB). Each candidate runs over the same documents, in rounds, order alternating; reported as
// ns per document over a baseline that evaluates nothing. `npm run build && node dist/bench/probes/filter-spellings.js`
import pg from 'pg';
import { planTraffic } from '../../kandev/traffic-plan.js';

const docs: string[] = [];
const subagent: string[] = [];
for (const s of planTraffic({ invalidJson: false, toolCallsPerTurn: 6 }).sessions) {
  for (const t of s.turns) {
    for (const w of t.writes) {
      if (!('metadata' in w) || w.metadata === null) continue;
      (w.class === 'subagent' ? subagent : docs).push(w.metadata);
    }
  }
}
const big = docs.filter((d) => d.length >= 3600);

// The exact set (docs/decisions.md, Derivation): the name, or a \u escape of _ (5f) or of any 6x/7x letter.
const RE = String.raw`\\u00(5[fF]|[67][0-9a-fA-F])`;
export const CANDIDATES: Record<string, string> = {
  baseline: 'true',
  'current: one regex subagent_task|\\u': String.raw`m ~ E'subagent_task|\\\\u'`,
  'A one regex, exact': `m ~ E'subagent_task|${RE.replaceAll('\\', '\\\\')}'`,
  'B strpos name OR (strpos \\u00 AND regex)': `strpos(m, 'subagent_task') > 0 OR (strpos(m, E'\\\\u00') > 0 AND m ~ E'${RE.replaceAll('\\', '\\\\')}')`,
  'C strpos name OR (strpos \\u005|\\u006|\\u007 AND regex)': `strpos(m, 'subagent_task') > 0 OR ((strpos(m, E'\\\\u005') > 0 OR strpos(m, E'\\\\u006') > 0 OR strpos(m, E'\\\\u007') > 0) AND m ~ E'${RE.replaceAll('\\', '\\\\')}')`,
  'C2 as C, the name with its quotes': `strpos(m, '"subagent_task"') > 0 OR ((strpos(m, E'\\\\u005') > 0 OR strpos(m, E'\\\\u006') > 0 OR strpos(m, E'\\\\u007') > 0) AND m ~ E'${RE.replaceAll('\\', '\\\\')}')`,
  'D LIKE name OR (LIKE \\u005|6|7 AND regex)': `m LIKE '%subagent_task%' OR ((m LIKE E'%\\\\\\\\u005%' OR m LIKE E'%\\\\\\\\u006%' OR m LIKE E'%\\\\\\\\u007%') AND m ~ E'${RE.replaceAll('\\', '\\\\')}')`,
  'E strpos name OR regex': `strpos(m, 'subagent_task') > 0 OR m ~ E'${RE.replaceAll('\\', '\\\\')}'`,
  'F two strpos (old, inexact: any \\u)': String.raw`strpos(m, 'subagent_task') > 0 OR strpos(m, E'\\u') > 0`,
};

async function main() {
  const c = new pg.Client(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  await c.connect();
  const version = (await c.query('SHOW server_version')).rows[0].server_version;
  const names = Object.keys(CANDIDATES);
  const sets = { 'non-subagent docs': docs, 'non-subagent docs ≥ 3.6 KB': big, 'subagent frames': subagent };
  console.log(`PostgreSQL ${version}; ${docs.length} non-subagent docs (avg ${Math.round(docs.reduce((a, d) => a + d.length, 0) / docs.length)} B), ${big.length} ≥ 3.6 KB, ${subagent.length} subagent frames`);
  const rounds = Number(process.env.ROUNDS ?? 7);
  for (const [label, set] of Object.entries(sets)) {
    const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const passes: Record<string, number> = {};
    for (let r = 0; r < rounds; r++) {
      for (const n of r % 2 ? [...names].reverse() : names) {
        const { rows } = await c.query(`EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) SELECT count(*) FILTER (WHERE ${CANDIDATES[n]}) FROM unnest($1::text[]) AS m`, [set]);
        const plan = rows[0]['QUERY PLAN'][0];
        times[n].push(plan['Execution Time']);
        if (r === 0) passes[n] = (await c.query(`SELECT count(*) FILTER (WHERE ${CANDIDATES[n]})::int AS n FROM unnest($1::text[]) AS m`, [set])).rows[0].n;
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    const base = med(times.baseline);
    console.log(`\n${label} (${set.length})`);
    for (const n of names) {
      if (n === 'baseline') continue;
      console.log(`  ${n.padEnd(58)} ${(((med(times[n]) - base) * 1e6) / set.length).toFixed(0).padStart(7)} ns/doc   passes ${passes[n]}`);
    }
  }
  await c.end();
}
main().catch((e) => { console.error(e); process.exit(1); });
