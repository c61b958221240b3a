// Upgrading in place (docs/upgrade.md): every earlier release, installed from its own commit with
// history, live traffic, a recorded failure and ENABLE ALWAYS, then `up` with this tree. Everything
// is kept, and the result has exactly the shape of a fresh install. Each release adds itself to
// RELEASES (test/helpers/releases.ts), so the next one is tested from it too.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';
import { installRelease, RELEASES } from '../helpers/releases.js';
import { installationShape } from '../helpers/catalog.js';
import { MIGRATIONS } from '../helpers/migrations.js';
import { createTurn, insertMessage, subagentMetadata, updateMessage } from '../../kandev/host.js';
import { PACKAGE_VERSION, quoteIdent } from '#sql';
import { readInstalled } from '../../src/installed.js';
import { utcTimestamp } from '../../src/timestamp.js';

const db = await freshDatabase('upgrade');
const pool = db.pool;

/** What an upgrade must keep, byte for byte. */
async function kept(schema: string) {
  const q = async (sql: string) => (await db.query(sql.replaceAll('@S', quoteIdent(schema)))).rows;
  return {
    keys: await q(`SELECT key, value FROM @S.kandev_meta WHERE key LIKE 'subagent_context%' ORDER BY key`),
    rows: await q(`SELECT * FROM @S.task_session_subagents ORDER BY task_session_id, tool_call_id, agent_execution_id`),
    // The columns every release has (0.4.0 added replayed_at, which an upgrade leaves NULL).
    failures: await q(`SELECT id, occurred_at, task_session_id, tool_call_id, message_id, agent_execution_id, sqlstate, message, detail
                         FROM @S.subagent_context_failures ORDER BY id`),
    stats: await q(`SELECT * FROM @S.subagent_context_stats()`),
  };
}

async function call(schema: string, key: string, at: string, status: string, tokens?: number) {
  const t = await createTurn(pool, schema, key, at);
  await insertMessage(pool, schema, { id: `msg-${key}`, session: t.session, task: t.task, turn: t.turn,
    created_at: at, updated_at: at,
    metadata: subagentMetadata({ tool_call_id: `toolu_${key}`, status, subagent: { subagent_type: 'explorer', total_tokens: tokens } }) });
  return t;
}

describe.each(RELEASES)('from $version ($commit)', async (release) => {
  const schema = `from_${release.version.replaceAll('.', '_')}`;
  const fresh = `fresh_${release.version.replaceAll('.', '_')}`;
  await db.createHost(schema);
  await db.createHost(fresh);
  await db.up(fresh);

  // History, then the old release installed (its `up`: migrations with the backfill), then live traffic.
  await call(schema, 'hist', '2026-08-01 08:00:00', 'completed', 100);
  const applied = await installRelease(release, db.url, schema);
  // Written after activation, as kandev writes: created_at is the UTC wall clock of the write.
  const utcNow = () => utcTimestamp();
  await call(schema, 'live', utcNow(), 'pending');
  await updateMessage(pool, schema, 'msg-live', subagentMetadata({ tool_call_id: 'toolu_live', status: 'in_progress',
    subagent: { subagent_type: 'explorer', status: 'async_launched', is_async: true } }), utcNow());
  await db.query(`INSERT INTO ${quoteIdent(schema)}.subagent_context_failures (task_session_id, tool_call_id, sqlstate, message)
                  VALUES ('s', 'toolu_x', '40P01', 'recorded by ${release.version}')`);
  await db.query(`ALTER TABLE ${quoteIdent(schema)}.task_session_messages ENABLE ALWAYS TRIGGER subagent_context_capture`);
  const before = await kept(schema);

  it(`${release.version} is installed and activated, with its history and live rows`, () => {
    expect(applied.length).toBeGreaterThan(0);
    expect(before.keys.map((k) => k.key)).toEqual(['subagent_context_backfill_through', 'subagent_context_capture_since']);
    expect(before.rows.map((r) => [r.tool_call_id, r.source])).toEqual([['toolu_hist', 'backfill'], ['toolu_live', 'live']]);
  });

  it('`up` upgrades in place: rows, row ids, keys, counters and failures kept; ENABLE ALWAYS kept', async () => {
    const result = await db.up(schema);
    expect(result.applied).toEqual(MIGRATIONS.slice(applied.length));
    expect(result.upgraded).toMatchObject({ from: release.version, to: PACKAGE_VERSION });
    expect(result.backfill.status).toBe('already activated');
    expect(await kept(schema)).toEqual(before);
    const { rows: [t] } = await db.query(`SELECT tgenabled FROM pg_trigger WHERE tgname = 'subagent_context_capture'
      AND tgrelid = '${quoteIdent(schema)}.task_session_messages'::regclass`);
    expect(t.tgenabled).toBe('A');
    expect(await readInstalled(await db.connect(), schema)).toMatchObject({ version: PACKAGE_VERSION, current: true });
  });

  it('the upgraded installation has exactly the shape of a fresh install', async () => {
    // The trigger's state is the operator's (ENABLE ALWAYS here): compared above, not here.
    await db.query(`ALTER TABLE ${quoteIdent(fresh)}.task_session_messages ENABLE ALWAYS TRIGGER subagent_context_capture`);
    expect(await installationShape(pool, schema)).toEqual(await installationShape(pool, fresh));
  });

  it('health has the new fields, and says stale for the failure recorded before the upgrade; capture merges into the existing rows', async () => {
    const { rows: [h] } = await db.query(`SELECT status, installed_version, shortfall, excess FROM ${quoteIdent(schema)}.subagent_context_health()`);
    // The failure recorded by the earlier release is not replayed yet: its row may be stale until `repair` (docs/health.md).
    expect(h).toEqual({ status: 'stale', installed_version: PACKAGE_VERSION, shortfall: 0n, excess: 0n });
    const id = before.rows.find((r) => r.tool_call_id === 'toolu_live')!.id;
    await updateMessage(pool, schema, 'msg-live', subagentMetadata({ tool_call_id: 'toolu_live', status: 'completed',
      subagent: { subagent_type: 'explorer', status: 'completed', total_tokens: 4242 } }), utcNow());
    const { rows } = await db.query(`SELECT id, total_tokens, tool_status, is_async FROM ${quoteIdent(schema)}.task_session_subagents
                                      WHERE tool_call_id = 'toolu_live'`);
    expect(rows).toEqual([{ id, total_tokens: 4242n, tool_status: 'completed', is_async: 1 }]);
  });

  it('a second `up` changes nothing', async () => {
    const shape = await installationShape(pool, schema);
    const data = await kept(schema);
    const again = await db.up(schema);
    expect([again.applied, again.upgraded, again.backfill.status]).toEqual([[], null, 'already activated']);
    expect(await installationShape(pool, schema)).toEqual(shape);
    expect(await kept(schema)).toEqual(data);
  });
});
