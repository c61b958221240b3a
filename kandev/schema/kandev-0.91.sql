-- kandev's host tables as kandev 0.91's fresh boot leaves them on PostgreSQL (docs/demo.md): the columns this
-- project reads plus the ones it does not, the CHECK and collation details, the later ALTER that added
-- prompt_seq, and all 38 indexes on these five tables (primary keys and unique constraints included),
-- with kandev's metadata expression indexes and the duplicates its migrations left behind.
-- A fixture for tests, the demo and benchmarks; the product never creates host tables.
-- Every column this project does not read has a default, so the fixture's own writers (kandev/host.ts,
-- kandev/traffic-write.ts) and the tests can name only the columns they care about.
-- @extschema@ is replaced with the target schema by the loader.

CREATE TABLE IF NOT EXISTS @extschema@.kandev_meta (
  key   text PRIMARY KEY,
  value text NOT NULL DEFAULT ''
);

CREATE TABLE IF NOT EXISTS @extschema@.tasks (
  id               text PRIMARY KEY,
  workspace_id     text NOT NULL DEFAULT '',
  board_id         text NOT NULL DEFAULT '',
  workflow_step_id text NOT NULL DEFAULT '',
  parent_id        text DEFAULT '',
  title            text NOT NULL,
  description      text DEFAULT '',
  state            text NOT NULL DEFAULT 'TODO',
  priority         text NOT NULL DEFAULT 'medium'
                     CONSTRAINT tasks_priority_check CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
  position         integer NOT NULL DEFAULT 0,
  external_id      text COLLATE "C",
  is_ephemeral     integer NOT NULL DEFAULT 0,
  metadata         text DEFAULT '{}',
  archived_at      timestamp(6),
  created_at       timestamp(6) NOT NULL,
  updated_at       timestamp(6) NOT NULL
);

CREATE TABLE IF NOT EXISTS @extschema@.task_sessions (
  id                     text PRIMARY KEY,
  task_id                text NOT NULL REFERENCES @extschema@.tasks (id) ON DELETE CASCADE,
  -- Kept from before executions had their own table; kandev 0.91 still creates it.
  agent_execution_id     text NOT NULL DEFAULT '',
  container_id           text NOT NULL DEFAULT '',
  agent_profile_id       text NOT NULL DEFAULT '',
  agent_profile_snapshot text DEFAULT '{}',
  executor_id            text DEFAULT '',
  environment_id         text DEFAULT '',
  repository_id          text DEFAULT '',
  base_branch            text DEFAULT '',
  state                  text NOT NULL DEFAULT 'CREATED',
  error_message          text DEFAULT '',
  metadata               text DEFAULT '{}',
  is_primary             integer NOT NULL DEFAULT 0,
  review_status          text DEFAULT '',
  started_at             timestamp(6) NOT NULL,
  completed_at           timestamp(6),
  updated_at             timestamp(6) NOT NULL
);

CREATE TABLE IF NOT EXISTS @extschema@.task_session_turns (
  id                   text PRIMARY KEY,
  task_session_id      text NOT NULL REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE,
  task_id              text NOT NULL,
  started_at           timestamp(6) NOT NULL,
  completed_at         timestamp(6),
  execution_profile_id text NOT NULL DEFAULT '',
  route_generation     bigint NOT NULL DEFAULT 0,
  metadata             text DEFAULT '{}',
  created_at           timestamp(6) NOT NULL,
  updated_at           timestamp(6) NOT NULL
);

CREATE TABLE IF NOT EXISTS @extschema@.task_session_messages (
  id              text PRIMARY KEY,
  task_session_id text NOT NULL REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE,
  task_id         text DEFAULT '',
  turn_id         text NOT NULL REFERENCES @extschema@.task_session_turns (id) ON DELETE CASCADE,
  author_type     text NOT NULL DEFAULT 'user',
  author_id       text DEFAULT '',
  content         text NOT NULL,
  requests_input  integer DEFAULT 0,
  type            text NOT NULL DEFAULT 'message',
  metadata        text DEFAULT '{}',
  created_at      timestamp(6) NOT NULL,
  updated_at      timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP
);
-- A later migration's column: it lands after updated_at, not where a fresh CREATE would put it.
ALTER TABLE @extschema@.task_session_messages ADD COLUMN IF NOT EXISTS prompt_seq bigint;

-- tasks: 11 indexes (primary key included).
CREATE INDEX IF NOT EXISTS idx_tasks_workspace_id ON @extschema@.tasks (workspace_id);
CREATE INDEX IF NOT EXISTS idx_tasks_board_id ON @extschema@.tasks (board_id);
CREATE INDEX IF NOT EXISTS idx_tasks_workflow_step_id ON @extschema@.tasks (workflow_step_id);
CREATE INDEX IF NOT EXISTS idx_tasks_parent_id ON @extschema@.tasks (parent_id);
CREATE INDEX IF NOT EXISTS idx_tasks_state ON @extschema@.tasks (state);
CREATE INDEX IF NOT EXISTS idx_tasks_archived_at ON @extschema@.tasks (archived_at);
CREATE INDEX IF NOT EXISTS idx_tasks_updated_at ON @extschema@.tasks (updated_at);
CREATE INDEX IF NOT EXISTS idx_tasks_board_step_position ON @extschema@.tasks (board_id, workflow_step_id, position);
CREATE UNIQUE INDEX IF NOT EXISTS idx_tasks_external_id ON @extschema@.tasks (workspace_id, external_id)
  WHERE external_id IS NOT NULL AND external_id <> '';
-- A duplicate of idx_tasks_board_id from an older migration, never dropped.
CREATE INDEX IF NOT EXISTS idx_tasks_board ON @extschema@.tasks (board_id);

-- task_sessions: 8 indexes.
CREATE INDEX IF NOT EXISTS idx_task_sessions_task_id ON @extschema@.task_sessions (task_id);
CREATE INDEX IF NOT EXISTS idx_task_sessions_state ON @extschema@.task_sessions (state);
CREATE INDEX IF NOT EXISTS idx_task_sessions_task_started ON @extschema@.task_sessions (task_id, started_at);
CREATE INDEX IF NOT EXISTS idx_task_sessions_agent_execution_id ON @extschema@.task_sessions (agent_execution_id);
CREATE INDEX IF NOT EXISTS idx_task_sessions_agent_profile_id ON @extschema@.task_sessions (agent_profile_id);
CREATE INDEX IF NOT EXISTS idx_task_sessions_primary ON @extschema@.task_sessions (task_id) WHERE is_primary = 1;
-- Duplicate of idx_task_sessions_task_id.
CREATE INDEX IF NOT EXISTS idx_sessions_task_id ON @extschema@.task_sessions (task_id);

-- task_session_turns: 5 indexes.
CREATE INDEX IF NOT EXISTS idx_turns_session_id ON @extschema@.task_session_turns (task_session_id);
CREATE INDEX IF NOT EXISTS idx_turns_session_started ON @extschema@.task_session_turns (task_session_id, started_at);
CREATE INDEX IF NOT EXISTS idx_turns_task_id ON @extschema@.task_session_turns (task_id);
CREATE INDEX IF NOT EXISTS idx_turns_open ON @extschema@.task_session_turns (task_session_id) WHERE completed_at IS NULL;

-- task_session_messages: 13 indexes, two of them on the parsed metadata. With those, a write whose
-- metadata is not valid JSON fails inside the index before any trigger runs, and no UPDATE of
-- metadata is HOT.
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON @extschema@.task_session_messages (task_session_id);
CREATE INDEX IF NOT EXISTS idx_messages_created_at ON @extschema@.task_session_messages (created_at);
CREATE INDEX IF NOT EXISTS idx_messages_session_created ON @extschema@.task_session_messages (task_session_id, created_at);
CREATE INDEX IF NOT EXISTS idx_messages_turn_id ON @extschema@.task_session_messages (turn_id);
CREATE INDEX IF NOT EXISTS idx_messages_turn_type ON @extschema@.task_session_messages (turn_id, type);
CREATE INDEX IF NOT EXISTS idx_messages_session_type ON @extschema@.task_session_messages (task_session_id, type);
CREATE INDEX IF NOT EXISTS idx_messages_pending_input ON @extschema@.task_session_messages (task_session_id)
  WHERE requests_input = 1;
CREATE INDEX IF NOT EXISTS idx_messages_prompt_seq ON @extschema@.task_session_messages (task_session_id, prompt_seq)
  WHERE prompt_seq IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_messages_tool_call_id
  ON @extschema@.task_session_messages ((metadata::jsonb ->> 'tool_call_id'));
CREATE INDEX IF NOT EXISTS idx_messages_session_tool_call
  ON @extschema@.task_session_messages (task_session_id, (metadata::jsonb ->> 'tool_call_id'));
-- Duplicates of idx_messages_session_created and idx_messages_turn_id.
CREATE INDEX IF NOT EXISTS idx_task_session_messages_session_created ON @extschema@.task_session_messages (task_session_id, created_at);
CREATE INDEX IF NOT EXISTS idx_task_session_messages_turn ON @extschema@.task_session_messages (turn_id);
