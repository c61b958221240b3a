// Probe: what one pass of the textual prefilter costs on the write path, and whether the document it reads
// there is the stored (compressed) one or the value the client sent. A table of kandev's larger
// non-subagent documents (Go-encoded, the traffic model's); every row UPDATEd with a new value by a
// PL/pgSQL loop (no round trips), with no trigger, then with a no-op AFTER trigger whose WHEN makes 1 or 8
// strpos passes that never match. The same passes are then timed by SELECT over new values and over the
// stored ones: the write path's cost per pass matches one of the two.
// `npm run build && node dist/bench/probes/filter-on-write.js` (DATABASE_URL, default the local server;
// STORAGE=external, see below)
import pg from 'pg';
import { planTraffic } from '../../kandev/traffic-plan.js';

const ROWS = 4000;
const ROUNDS = Number(process.env.ROUNDS ?? 5);

const docs: string[] = [];
for (const s of planTraffic({ invalidJson: false, toolCallsPerTurn: 6 }).sessions) {
  for (const t of s.turns) {
    for (const w of t.writes) {
      if ('metadata' in w && w.metadata !== null && w.class !== 'subagent' && w.metadata.length >= 3600) docs.push(w.metadata);
    }
  }
}

/** `n` strpos passes over `col` for needles no document holds. */
const passes = (n: number, col: string) => [...Array(n).keys()].map((k) => `strpos(${col}, 'zq${k}xw') > 0`).join(' OR ');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function main() {
  const c = new pg.Client(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  await c.connect();
  const timed = async (sql: string) => {
    const t0 = process.hrtime.bigint();
    await c.query(sql);
    return Number(process.hrtime.bigint() - t0) / 1e3 / ROWS;
  };
  try {
    await c.query(`CREATE TEMP TABLE probe (id int PRIMARY KEY, m text)`);
    // STORAGE=external stores the documents out of line and uncompressed: reading a stored one is then a
    // TOAST fetch, far dearer than a decompression, so the write path's cost shows plainly which it reads.
    if (process.env.STORAGE === 'external') await c.query(`ALTER TABLE probe ALTER m SET STORAGE EXTERNAL`);
    await c.query(`CREATE FUNCTION pg_temp.probe_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$`);
    await c.query(`INSERT INTO probe SELECT i, ($1::text[])[1 + i % array_length($1::text[], 1)] FROM generate_series(0, ${ROWS - 1}) i`, [docs]);
    const { rows: [size] } = await c.query(`SELECT avg(length(m))::int AS chars, avg(pg_column_size(m))::int AS stored FROM probe`);
    console.log(`PostgreSQL ${(await c.query('SHOW server_version')).rows[0].server_version}; ${ROWS} rows of ${docs.length} documents, ` +
      `${size.chars} characters on average, stored in ${size.stored} bytes`);

    // `|| ''` makes a new, uncompressed value, as a client's parameter is.
    const update = `DO $$ DECLARE r record; BEGIN
      FOR r IN SELECT id, m FROM probe ORDER BY id LOOP UPDATE probe SET m = r.m || '' WHERE id = r.id; END LOOP; END $$`;
    const write: Record<string, number[]> = { 0: [], 1: [], 8: [] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const n of [0, 1, 8]) {
        await c.query(`DROP TRIGGER IF EXISTS probe_when ON probe`);
        if (n > 0) {
          await c.query(`CREATE TRIGGER probe_when AFTER UPDATE ON probe FOR EACH ROW WHEN (${passes(n, 'NEW.m')})
                         EXECUTE FUNCTION pg_temp.probe_noop()`);
        }
        await c.query(`VACUUM probe`);
        write[n].push(await timed(update));
      }
    }
    const select: Record<string, number[]> = { fresh0: [], fresh8: [], stored0: [], stored8: [] };
    for (let r = 0; r < ROUNDS; r++) {
      select.fresh0.push(await timed(`SELECT count(*) FROM (SELECT m || '' AS x FROM probe OFFSET 0) s WHERE x IS NOT NULL`));
      select.fresh8.push(await timed(`SELECT count(*) FROM (SELECT m || '' AS x FROM probe OFFSET 0) s WHERE ${passes(8, 'x')}`));
      select.stored0.push(await timed(`SELECT count(*) FROM probe WHERE m IS NOT NULL`));
      select.stored8.push(await timed(`SELECT count(*) FROM probe WHERE ${passes(8, 'm')}`));
    }
    const perPass = (a: number[], b: number[], n: number) => ((median(a) - median(b)) / n).toFixed(1);
    console.log(`UPDATE, no trigger:                 ${median(write[0]).toFixed(1)} µs`);
    console.log(`write path, per pass (WHEN, 1):     ${perPass(write[1], write[0], 1)} µs`);
    console.log(`write path, per pass (WHEN, 8):     ${perPass(write[8], write[0], 8)} µs`);
    console.log(`SELECT, per pass, new values:       ${perPass(select.fresh8, select.fresh0, 8)} µs`);
    console.log(`SELECT, per pass, stored values:    ${perPass(select.stored8, select.stored0, 8)} µs (each pass decompresses)`);
  } finally {
    await c.end();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
