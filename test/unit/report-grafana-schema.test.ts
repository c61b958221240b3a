// sql/dashboards/grafana-dashboard.json against Grafana's own published dashboard model: the TypeScript
// types of @grafana/schema (the version GRAFANA.schemaPackage names, the oldest Grafana docs/dashboards.md
// supports). The JSON is compiled as an object literal that must satisfy `Dashboard`: every field known
// to Grafana, of its type, required fields present, enum fields holding one of their values. No database.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { PACKAGE_ROOT } from '../../src/paths.js';

const DIR = join(PACKAGE_ROOT, 'sql', 'dashboards');
const json = readFileSync(join(DIR, 'grafana-dashboard.json'), 'utf8');
const { GRAFANA }: { GRAFANA: { schemaPackage: string } } = await import(join(DIR, 'build-grafana-dashboard.mjs'));

/** Type errors of `source` compiled as a file of this project (so that it finds node_modules). */
function typeErrors(source: string): string[] {
  const file = join(PACKAGE_ROOT, 'test', 'unit', '__grafana_dashboard_check.ts');
  const options: ts.CompilerOptions = { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, skipLibCheck: true, types: [] };
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host), exists = host.fileExists.bind(host), get = host.getSourceFile.bind(host);
  host.readFile = (f) => (f === file ? source : read(f));
  host.fileExists = (f) => f === file || exists(f);
  host.getSourceFile = (f, v, ...rest) => (f === file ? ts.createSourceFile(f, source, v) : get(f, v, ...rest));
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

/**
 * Grafana's types as JSON can hold them: its string enums (MappingType.ValueToText, …) as their values
 * ('value'), which is what a dashboard file says.
 */
const AS_JSON = `type AsJson<T> = T extends string ? \`\${T}\` : T extends number | boolean | null | undefined ? T
  : T extends Array<infer U> ? Array<AsJson<U>> : T extends object ? { [K in keyof T]: AsJson<T[K]> } : T;`;

describe(`the Grafana dashboard against ${GRAFANA.schemaPackage}`, () => {
  it('is installed at that version', () => {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'node_modules', '@grafana', 'schema', 'package.json'), 'utf8'));
    expect(`${pkg.name} ${pkg.version}`).toBe(GRAFANA.schemaPackage);
  });

  it('satisfies its Dashboard type', () => {
    const errors = typeErrors(`import type { Dashboard } from '@grafana/schema';\n${AS_JSON}\n` +
      `export const dashboard = ${json.trim()} satisfies AsJson<Dashboard>;\n`);
    expect(errors).toEqual([]);
  }, 60_000);

  it('the check catches what Grafana would not read: an unknown field, a wrong type, a bad enum value', () => {
    const dashboard = JSON.parse(json);
    const check = (d: unknown) => typeErrors(`import type { Dashboard } from '@grafana/schema';\n${AS_JSON}\n` +
      `export const dashboard = ${JSON.stringify(d)} satisfies AsJson<Dashboard>;\n`);
    expect(check({ ...dashboard, __inputs: [] }).join('\n')).toMatch(/__inputs/);
    expect(check({ ...dashboard, schemaVersion: '39' }).join('\n')).toMatch(/schemaVersion|string/);
    const badVariable = { ...dashboard, templating: { list: [{ ...dashboard.templating.list[0], type: 'dropdown' }] } };
    expect(check(badVariable).join('\n')).toMatch(/dropdown/);
  }, 60_000);
});
