// The kandev fixtures are kandev's tables, not a likeness (docs/demo.md): the 0.91 fixture's indexes on
// task_session_messages are, name for name and definition for definition, the ones kandev v0.91.0-41
// (cd9fa0e) creates on PostgreSQL (its schema init, boot migrations and analytics repository); the 0.92
// fixture adds what kandev after 0.91 adds. On 4259581 the 0.91 fixture had 8 indexes kandev does not
// create and lacked 7 it does, so the first test fails there.
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '../helpers/database.js';

const db = await freshDatabase('kandev_fixture');
await db.createHost('k091', { shape: 'kandev-0.91' });
await db.createHost('k092', { shape: 'kandev-0.92' });

/** kandev 0.91's indexes on task_session_messages, as pg_get_indexdef prints them (schema left out). */
const KANDEV_091_MESSAGE_INDEXES: Record<string, string> = {
  task_session_messages_pkey: 'CREATE UNIQUE INDEX task_session_messages_pkey ON task_session_messages USING btree (id)',
  idx_messages_session_id: 'CREATE INDEX idx_messages_session_id ON task_session_messages USING btree (task_session_id)',
  idx_messages_created_at: 'CREATE INDEX idx_messages_created_at ON task_session_messages USING btree (created_at)',
  idx_messages_session_created: 'CREATE INDEX idx_messages_session_created ON task_session_messages USING btree (task_session_id, created_at)',
  idx_messages_turn_id: 'CREATE INDEX idx_messages_turn_id ON task_session_messages USING btree (turn_id)',
  idx_messages_task_author_created: 'CREATE INDEX idx_messages_task_author_created ON task_session_messages USING btree (task_id, author_type, type, created_at DESC)',
  idx_messages_session_updated: 'CREATE INDEX idx_messages_session_updated ON task_session_messages USING btree (task_session_id, updated_at)',
  idx_messages_metadata_tool_call_id: "CREATE INDEX idx_messages_metadata_tool_call_id ON task_session_messages USING btree (task_session_id, (((metadata)::jsonb ->> 'tool_call_id'::text)))",
  idx_messages_metadata_pending_id: "CREATE INDEX idx_messages_metadata_pending_id ON task_session_messages USING btree (task_session_id, (((metadata)::jsonb ->> 'pending_id'::text)))",
  idx_messages_prompt_order: 'CREATE INDEX idx_messages_prompt_order ON task_session_messages USING btree (task_session_id, created_at, id)',
  idx_messages_author_type: 'CREATE INDEX idx_messages_author_type ON task_session_messages USING btree (task_session_id, author_type, type)',
  idx_messages_turn: 'CREATE INDEX idx_messages_turn ON task_session_messages USING btree (turn_id)',
};

/** What kandev after 0.91 adds on task_session_messages. */
const KANDEV_092_MESSAGE_INDEXES: Record<string, string> = {
  ...KANDEV_091_MESSAGE_INDEXES,
  idx_messages_payload_digest: 'CREATE INDEX idx_messages_payload_digest ON task_session_messages USING btree (payload_digest)',
  idx_messages_prompt_user_order: 'CREATE INDEX idx_messages_prompt_user_order ON task_session_messages USING btree (task_session_id, author_type, created_at, id)',
  idx_messages_metadata_pending_id_lookup: "CREATE INDEX idx_messages_metadata_pending_id_lookup ON task_session_messages USING btree ((((metadata)::jsonb ->> 'pending_id'::text)))",
  idx_messages_metadata_pending_id_lookup_ordered: "CREATE INDEX idx_messages_metadata_pending_id_lookup_ordered ON task_session_messages USING btree ((((metadata)::jsonb ->> 'pending_id'::text)), created_at, id) WHERE (((metadata)::jsonb ->> 'pending_id'::text) IS NOT NULL)",
};

async function indexes(schema: string, table: string): Promise<Record<string, string>> {
  const { rows } = await db.query<{ name: string; def: string }>(
    `SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS def FROM pg_index
      WHERE indrelid = format('%I.%I', $1::text, $2::text)::regclass`, [schema, table]);
  return Object.fromEntries(rows.map((r) => [r.name.replace(`${schema}.`, ''), r.def.replaceAll(`${schema}.`, '')]));
}

async function column(schema: string, table: string, name: string) {
  const { rows: [c] } = await db.query(`SELECT data_type, is_nullable, column_default FROM information_schema.columns
     WHERE table_schema = $1 AND table_name = $2 AND column_name = $3`, [schema, table, name]);
  return c;
}

describe('the kandev 0.91 fixture', () => {
  it("has kandev's indexes on task_session_messages and no other", async () => {
    expect(await indexes('k091', 'task_session_messages')).toEqual(KANDEV_091_MESSAGE_INDEXES);
  });

  it("has kandev's 38 indexes on the five tables, its column types and its CHECK", async () => {
    const { rows: [n] } = await db.query(`SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = 'k091'
        AND tablename IN ('kandev_meta', 'tasks', 'task_sessions', 'task_session_turns', 'task_session_messages')`);
    expect(n.n).toBe(38);
    expect(await column('k091', 'task_session_messages', 'prompt_seq')).toEqual({ data_type: 'integer', is_nullable: 'NO', column_default: '0' });
    expect(await column('k091', 'task_session_messages', 'turn_id')).toMatchObject({ is_nullable: 'NO' });
    expect(await column('k091', 'tasks', 'board_id')).toBeUndefined();
    expect(await column('k091', 'tasks', 'workflow_id')).toMatchObject({ data_type: 'text', is_nullable: 'NO' });
    expect(await column('k091', 'task_sessions', 'agent_profile_id')).toMatchObject({ is_nullable: 'YES', column_default: null });
    expect(await column('k091', 'task_sessions', 'is_primary')).toMatchObject({ is_nullable: 'YES' });
    const { rows: [check] } = await db.query(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
        WHERE conrelid = 'k091.tasks'::regclass AND conname = 'tasks_priority_check'`);
    expect(check.def).toBe("CHECK ((priority = ANY (ARRAY['critical'::text, 'high'::text, 'medium'::text, 'low'::text])))");
  });
});

describe('the kandev 0.92 fixture (kandev after 0.91)', () => {
  it('adds the payload columns and table, a nullable turn_id and four more message indexes', async () => {
    expect(await indexes('k092', 'task_session_messages')).toEqual(KANDEV_092_MESSAGE_INDEXES);
    expect(await column('k092', 'task_session_messages', 'payload_digest')).toEqual({ data_type: 'text', is_nullable: 'NO', column_default: "''::text" });
    expect(await column('k092', 'task_session_messages', 'payload_size')).toEqual({ data_type: 'integer', is_nullable: 'NO', column_default: '0' });
    expect(await column('k092', 'task_session_messages', 'turn_id')).toMatchObject({ is_nullable: 'YES' });
    expect(await column('k092', 'task_message_payloads', 'compressed_content')).toMatchObject({ data_type: 'bytea', is_nullable: 'NO' });
  });
});
