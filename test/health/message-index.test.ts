// Health's one index on kandev's task_session_messages is built CONCURRENTLY by activation, and a build
// that was interrupted (an INVALID index, which IF NOT EXISTS would keep forever) is rebuilt.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';

const db = await freshDatabase('message_index');

const state = async (schema: string) => (await db.query(
  `SELECT i.indisvalid AS valid, pg_get_indexdef(i.indexrelid) AS def
     FROM pg_index i WHERE i.indexrelid = to_regclass(format('%I.subagent_context_recent_messages_idx', $1::text))`,
  [schema])).rows;

describe("health's index on task_session_messages", () => {
  it('exists after up: valid, partial on the capture prefilter, on created_at', async () => {
    await db.createHost('fresh');
    await db.up('fresh');
    const [index] = await state('fresh');
    expect(index.valid).toBe(true);
    expect(index.def).toMatch(/ON fresh\.task_session_messages USING btree \(created_at\) WHERE/);
    expect(index.def).toContain(`strpos(metadata, 'subagent_task'::text) > 0`);
  });

  it('is not created by the install transaction (only the activation builds it, concurrently)', async () => {
    await db.createHost('installed');
    await db.install('installed');
    expect(await state('installed')).toEqual([]);
  });

  it('an interrupted build (INVALID index) is dropped and built again by the next up', async () => {
    await db.createHost('crashed');
    await db.install('crashed');
    await db.query(`CREATE INDEX subagent_context_recent_messages_idx ON crashed.task_session_messages (id)`);
    // What a failed CREATE INDEX CONCURRENTLY leaves behind.
    await db.query(`UPDATE pg_index SET indisvalid = false
                     WHERE indexrelid = 'crashed.subagent_context_recent_messages_idx'::regclass`);
    expect((await state('crashed'))[0].valid).toBe(false);
    await db.up('crashed');
    const [index] = await state('crashed');
    expect(index.valid).toBe(true);
    expect(index.def).toMatch(/USING btree \(created_at\) WHERE/);
  });
});
