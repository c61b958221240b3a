// task_session_subagents as docs/integration.md defines it, written once for the tests: each column with its
// declaration, in order, and the unique key. Tests derive from it the column lists they select, the
// lookalike and pre-existing tables they create, and the model's Row type is checked against it.

/** Every column as `[name, declaration]`; `@s` stands for the schema of the referenced host table. */
export const SUBAGENT_TABLE = [
  ['id', 'text PRIMARY KEY'],
  ['task_session_id', 'text NOT NULL REFERENCES @s.task_sessions (id) ON DELETE CASCADE'],
  ['task_id', 'text NOT NULL'],
  ['turn_id', 'text'],
  ['tool_call_id', 'text NOT NULL'],
  ['agent_execution_id', 'text NOT NULL'],
  ['parent_tool_call_id', 'text'],
  ['subagent_type', 'text'],
  ['description', 'text'],
  ['agent_id', 'text'],
  ['child_session_id', 'text'],
  ['model', 'text'],
  ['agent_status', 'text'],
  ['tool_status', 'text'],
  ['is_async', 'integer NOT NULL DEFAULT 0'],
  ['total_tokens', 'bigint'],
  ['tool_use_count', 'bigint'],
  ['duration_ms', 'bigint'],
  ['source', "text NOT NULL DEFAULT 'live'"],
  ['observed_at', 'timestamp(6) NOT NULL'],
  ['settled_at', 'timestamp(6)'],
  ['updated_at', 'timestamp(6) NOT NULL'],
] as const;

export type SubagentColumn = (typeof SUBAGENT_TABLE)[number][0];

export const KEY_COLUMNS = ['task_session_id', 'agent_execution_id', 'tool_call_id'] as const;
export const SUBAGENT_KEY = `UNIQUE (${KEY_COLUMNS.join(', ')})`;

/** The columns a derivation fills (all but the generated id), in table order, for a SELECT list. */
export const ROW_COLUMNS = SUBAGENT_TABLE.map(([name]) => name).filter((name) => name !== 'id');

/** `columns` as a SELECT list. */
export const selectList = (columns: readonly string[]) => columns.join(', ');
