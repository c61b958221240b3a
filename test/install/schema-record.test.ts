// Each release's installed schema is a committed, reviewed file (schema-record/<version>.txt, made by
// test/helpers/schema-record.ts): every earlier release installed from its own commit leaves exactly its
// record, and this tree leaves this release's, both on a fresh install and after `up` from every earlier
// release. A change to the installation fails here until the record is regenerated (`npm run
// schema-record`), so it shows up in review as a diff of that file.
// SCHEMA_RECORD=write (what `npm run schema-record` sets) writes the records instead of comparing them.
import { describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { freshDatabase } from '../helpers/database.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { RECORD_DIR, recordFile, schemaRecord } from '../helpers/schema-record.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { PACKAGE_VERSION } from '#sql';

const db = await freshDatabase('schema_record');
const HOST = 'record_host';
await db.createHost(HOST);
const write = process.env.SCHEMA_RECORD === 'write';

/** The installation in `schema` is `version`'s record, or (SCHEMA_RECORD=write) becomes it. */
async function expectRecord(schema: string, version: string) {
  const actual = await schemaRecord(db.pool, schema, HOST, version);
  const file = recordFile(version);
  if (write) {
    mkdirSync(RECORD_DIR, { recursive: true });
    writeFileSync(file, actual);
  }
  const name = relative(PACKAGE_ROOT, file);
  expect(existsSync(file), `${name} is missing: run \`npm run schema-record\` and commit it`).toBe(true);
  expect(actual, `the installation is not ${name}: if the change is meant, run \`npm run schema-record\` and commit the ` +
    'file with it (its diff is the change to review)').toBe(readFileSync(file, 'utf8'));
}

it(`a fresh install of this tree is schema-record/${PACKAGE_VERSION}.txt`, async () => {
  await db.createHost('fresh');
  await db.up('fresh');
  await expectRecord('fresh', PACKAGE_VERSION);
});

it(`names everything it creates subagent_context_* (but the public table task_session_subagents), as schema-record/${PACKAGE_VERSION}.txt shows`, () => {
  const record = readFileSync(recordFile(PACKAGE_VERSION), 'utf8');
  const section = (name: string) => (record.split(`\n## ${name}`)[1] ?? '').split('\n## ')[0]!.split('\n').slice(1).filter(Boolean);
  const names = [
    ...section('relations').map((l) => l.split(/[ ;]/)[1]!),
    ...section('types').map((l) => /@extschema@\.(\w+)/.exec(l)![1]!),
    ...section('functions').map((l) => l.split('(')[0]!),
    ...section('triggers').map((l) => /CREATE TRIGGER (\w+)/.exec(l)![1]!),
  ];
  expect(names.length).toBeGreaterThan(60);
  expect(names.filter((n) => !n.startsWith('subagent_context_') && n !== 'task_session_subagents')).toEqual([]);
});

describe.each(RELEASES)('$version ($commit)', async (release) => {
  const schema = `from_${release.version.replaceAll('.', '_')}`;
  await db.createHost(schema);
  await installRelease(release, db.url, schema);

  it(`installed from its commit, it is schema-record/${release.version}.txt`, async () => {
    await expectRecord(schema, release.version);
  });

  it(`upgraded by \`up\`, it is schema-record/${PACKAGE_VERSION}.txt`, async () => {
    await db.up(schema);
    // Compared, never written: the fresh install above wrote this release's record.
    const file = recordFile(PACKAGE_VERSION);
    expect(await schemaRecord(db.pool, schema, HOST, PACKAGE_VERSION), `the upgrade from ${release.version} does not leave what a fresh ` +
      `install leaves (${relative(PACKAGE_ROOT, file)})`).toBe(readFileSync(file, 'utf8'));
  });
});
