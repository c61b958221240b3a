// kandev's side of the database, for the demo, tests and benchmarks: the host tables (a fixture, never
// a product migration) and message writes shaped like kandev's (docs/demo.md).
import type pg from 'pg';

/** Anything that runs a query: a client, a pool's client, or the pool itself. */
export type Queryable = pg.ClientBase | pg.Pool;
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { quoteIdent } from '#sql';
import { PACKAGE_ROOT } from '../src/paths.js';
import { goMarshal } from './gojson.js';

/** A fixture of kandev/schema/, its @extschema@ placeholder replaced by the quoted schema. */
function fixture(file: string, schema: string): string {
  return readFileSync(join(PACKAGE_ROOT, 'kandev', 'schema', file), 'utf8').replaceAll('@extschema@', quoteIdent(schema));
}

/**
 * The host's shapes: 'minimal' is only the columns this project reads (any host, invalid JSON accepted);
 * 'kandev-0.91' is the tables as kandev 0.91's fresh boot leaves them (more columns, 38 indexes, two of
 * them on the parsed metadata, so invalid JSON is refused before any trigger runs); 'kandev-0.92' is kandev
 * after 0.91 (kandev-0.92.sql on top: nullable turn_id, payload_digest/payload_size, four metadata
 * expression indexes).
 */
export const HOST_SHAPES = ['minimal', 'kandev-0.91', 'kandev-0.92'] as const;
export type HostShape = typeof HOST_SHAPES[number];

/** The fixture files of each kandev shape, applied in order. */
const KANDEV_FIXTURES: Partial<Record<HostShape, string[]>> = {
  'kandev-0.91': ['kandev-0.91.sql'],
  'kandev-0.92': ['kandev-0.91.sql', 'kandev-0.92.sql'],
};

/** Whether a shape is one of kandev's own (its metadata expression indexes refuse invalid JSON). */
export function isKandevShape(shape: HostShape | undefined): boolean {
  return shape !== undefined && KANDEV_FIXTURES[shape] !== undefined;
}

export interface HostOptions {
  /** Default 'minimal'. The kandev shapes take no other option. */
  shape?: HostShape;
  /** kandev's metadata expression indexes (kandev-metadata-indexes.sql). */
  metadataIndexes?: boolean;
  /**
   * task_session_messages partitioned by range of created_at (kandev-messages-partitioned.sql): `true`
   * with a few partitions around the server's clock (kandev-messages-partitions.sql), 'parent only'
   * with none (for pg_partman's create_parent).
   */
  partitioned?: boolean | 'parent only';
  /**
   * On a Citus coordinator: kandev's tables distributed and co-located on task_session_id
   * (kandev-citus.sql), and the two capture tables created distributed (kandev-citus-capture-tables.sql),
   * as docs/citus.md has the operator do before `up`; 'host only' leaves the capture tables out.
   */
  citus?: boolean | 'host only';
}

export async function createHostTables(client: Queryable, schema: string, opts: HostOptions = {}) {
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
  const kandev = opts.shape ? KANDEV_FIXTURES[opts.shape] : undefined;
  if (kandev) {
    for (const file of kandev) await client.query(fixture(file, schema));
    return;
  }
  await client.query(fixture('kandev-host.sql', schema));
  if (opts.partitioned) {
    await client.query(fixture('kandev-messages-partitioned.sql', schema));
    if (opts.partitioned === true) await client.query(fixture('kandev-messages-partitions.sql', schema));
  }
  if (opts.metadataIndexes) await client.query(fixture('kandev-metadata-indexes.sql', schema));
  if (opts.citus) {
    // One statement at a time, as psql sends them: Citus runs create_distributed_table and the foreign
    // keys added after it each in its own transaction. (These files hold no dollar-quoted bodies.)
    const files = opts.citus === true ? ['kandev-citus.sql', 'kandev-citus-capture-tables.sql'] : ['kandev-citus.sql'];
    for (const file of files) {
      for (const statement of fixture(file, schema).split(/;\s*$/m)) {
        if (statement.replace(/--[^\n]*/g, '').trim()) await client.query(statement);
      }
    }
  }
}

/** task_session_subagents as kandev >= 0.89 creates it itself, for the adoption paths. */
export async function createKandevSubagentTable(client: Queryable, schema: string) {
  await client.query(fixture('kandev-subagents-table.sql', schema));
}

export interface SubagentFrame {
  tool_call_id?: string | null;
  status?: string;
  parent_tool_call_id?: string;
  agent_execution_id?: string;
  subagent?: Record<string, unknown> | null;
}

/** The metadata text of one subagent tool-call frame, Go-encoded as kandev writes it. */
export function subagentMetadata(frame: SubagentFrame): string {
  const doc: Record<string, unknown> = { title: 'Task' };
  if (frame.tool_call_id !== undefined) doc.tool_call_id = frame.tool_call_id;
  if (frame.status !== undefined) doc.status = frame.status;
  if (frame.parent_tool_call_id !== undefined) doc.parent_tool_call_id = frame.parent_tool_call_id;
  if (frame.agent_execution_id !== undefined) doc.agent_execution_id = frame.agent_execution_id;
  const normalized: Record<string, unknown> = { kind: 'subagent_task' };
  if (frame.subagent !== null) normalized.subagent_task = frame.subagent ?? {};
  doc.normalized = normalized;
  return goMarshal(doc);
}

/** Creates a task, a session and a turn (ids derived from `key`); returns their ids. */
export async function createTurn(client: Queryable, schema: string, key: string, at = '2026-08-12 09:00:00') {
  const s = quoteIdent(schema);
  const ids = { task: `task-${key}`, session: `session-${key}`, turn: `turn-${key}` };
  await client.query(`INSERT INTO ${s}.tasks (id, title, created_at, updated_at) VALUES ($1, $1, $2, $2) ON CONFLICT DO NOTHING`, [ids.task, at]);
  await client.query(`INSERT INTO ${s}.task_sessions (id, task_id, started_at, updated_at) VALUES ($1, $2, $3, $3) ON CONFLICT DO NOTHING`, [ids.session, ids.task, at]);
  await client.query(`INSERT INTO ${s}.task_session_turns (id, task_session_id, task_id, started_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $4, $4) ON CONFLICT DO NOTHING`, [ids.turn, ids.session, ids.task, at]);
  return ids;
}

export interface MessageWrite {
  id: string;
  session: string;
  task?: string | null;
  turn: string;
  metadata: string | null;
  created_at?: string;
  updated_at?: string;
  type?: string;
}

/** INSERT a message row (kandev's first write of a tool call). */
export async function insertMessage(client: Queryable, schema: string, m: MessageWrite) {
  const s = quoteIdent(schema);
  await client.query(
    `INSERT INTO ${s}.task_session_messages
       (id, task_session_id, task_id, turn_id, author_type, content, type, metadata, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'agent', '', $5, $6, $7, $8)`,
    [m.id, m.session, m.task ?? null, m.turn, m.type ?? 'tool_call', m.metadata,
     m.created_at ?? '2026-08-12 09:00:00', m.updated_at ?? m.created_at ?? '2026-08-12 09:00:00']);
}

/** UPDATE a message row in place (every later frame rewrites the whole metadata). */
export async function updateMessage(client: Queryable, schema: string, id: string, metadata: string | null, updatedAt: string) {
  const s = quoteIdent(schema);
  await client.query(`UPDATE ${s}.task_session_messages SET metadata = $2, updated_at = $3 WHERE id = $1`, [id, metadata, updatedAt]);
}
