// The CLI's one way to run a query file of sql/dashboards/ or sql/report/ (the SQL Grafana, `report`,
// `metrics` and `health` share): the file as written, its counts as numbers.
import type pg from 'pg';
import { sqlFile } from '#sql';

// int2, int4, int8, float4, float8, numeric: numbers (counts fit a double exactly).
const NUMERIC_TYPES = new Set([20, 21, 23, 700, 701, 1700]);

/** The rows of one query file run in `schema`, numeric columns as numbers (NULL stays null). */
export async function readDashboard(client: pg.ClientBase, schema: string, file: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  const result = await client.query(sqlFile(file, schema), params);
  const numeric = result.fields.filter((f) => NUMERIC_TYPES.has(f.dataTypeID)).map((f) => f.name);
  return result.rows.map((row) => {
    const out: Record<string, unknown> = { ...row };
    for (const name of numeric) out[name] = row[name] === null ? null : Number(row[name]);
    return out;
  });
}
