-- kandev's host tables as kandev 0.91's fresh boot leaves them on PostgreSQL (kandev v0.91.0-41, commit
-- cd9fa0e), written as `pg_dump --schema-only` prints them: its schema init (CREATE TABLE … IF NOT EXISTS),
-- then the boot migrations that touch these tables in the order they run (the priority column turned into
-- text with its CHECK, the ALTERs that append columns, prompt_seq last on the messages), then the analytics
-- repository's own indexes. 38 indexes on the five tables, primary keys included; 12 of them on
-- task_session_messages, two of those on the parsed metadata (with them a write whose metadata is not valid
-- JSON fails inside the index before any trigger runs, and no UPDATE of metadata is HOT).
-- A fixture for tests, the demo and benchmarks; the product never creates host tables.
-- Columns kandev declares NOT NULL without a default (title, content, the timestamps) stay that way: the
-- fixture's writers (kandev/host.ts, kandev/traffic-write.ts) name them.
-- @extschema@ is replaced with the target schema by the loader.

CREATE TABLE @extschema@.kandev_meta (
    key text NOT NULL,
    value text DEFAULT ''::text NOT NULL
);

CREATE TABLE @extschema@.tasks (
    id text NOT NULL,
    workspace_id text DEFAULT ''::text NOT NULL,
    workflow_id text DEFAULT ''::text NOT NULL,
    workflow_step_id text DEFAULT ''::text NOT NULL,
    title text NOT NULL,
    description text DEFAULT ''::text,
    state text DEFAULT 'TODO'::text,
    priority text DEFAULT 'medium'::text NOT NULL,
    "position" integer DEFAULT 0,
    wip_admitted integer DEFAULT 1 NOT NULL,
    queued_for_step_id text DEFAULT ''::text NOT NULL,
    queued_at timestamp without time zone,
    metadata text DEFAULT '{}'::text,
    autopilot_enabled integer DEFAULT 0 NOT NULL,
    archived_at timestamp without time zone,
    created_at timestamp without time zone NOT NULL,
    updated_at timestamp without time zone NOT NULL,
    is_ephemeral integer DEFAULT 0 NOT NULL,
    parent_id text DEFAULT ''::text,
    origin text DEFAULT 'manual'::text,
    project_id text DEFAULT ''::text,
    labels text DEFAULT '[]'::text,
    identifier text,
    archived_by_cascade_id text DEFAULT ''::text,
    external_id text COLLATE pg_catalog."C",
    external_id_settled_at timestamp without time zone,
    checkout_agent_id text,
    checkout_at timestamp without time zone,
    checkout_run_id text,
    CONSTRAINT tasks_priority_check CHECK ((priority = ANY (ARRAY['critical'::text, 'high'::text, 'medium'::text, 'low'::text])))
);

-- agent_execution_id and container_id: kept from before executions had their own table (only SQLite
-- rebuilds the table without them). agent_profile_id and is_primary are nullable.
CREATE TABLE @extschema@.task_sessions (
    id text NOT NULL,
    task_id text NOT NULL,
    agent_execution_id text DEFAULT ''::text NOT NULL,
    container_id text DEFAULT ''::text NOT NULL,
    agent_profile_id text,
    execution_profile_id text DEFAULT ''::text NOT NULL,
    route_generation integer DEFAULT 0 NOT NULL,
    route_state text DEFAULT ''::text NOT NULL,
    route_reason text DEFAULT ''::text NOT NULL,
    downstream_acp_session_id text DEFAULT ''::text NOT NULL,
    executor_id text DEFAULT ''::text,
    executor_profile_id text DEFAULT ''::text,
    environment_id text DEFAULT ''::text,
    repository_id text DEFAULT ''::text,
    base_branch text DEFAULT ''::text,
    agent_profile_snapshot text DEFAULT '{}'::text,
    executor_snapshot text DEFAULT '{}'::text,
    environment_snapshot text DEFAULT '{}'::text,
    repository_snapshot text DEFAULT '{}'::text,
    state text DEFAULT 'CREATED'::text NOT NULL,
    error_message text DEFAULT ''::text,
    metadata text DEFAULT '{}'::text,
    started_at timestamp without time zone NOT NULL,
    completed_at timestamp without time zone,
    updated_at timestamp without time zone NOT NULL,
    is_primary integer DEFAULT 0,
    is_passthrough integer DEFAULT 0,
    review_status text DEFAULT ''::text,
    base_commit_sha text DEFAULT ''::text,
    task_environment_id text DEFAULT ''::text,
    cost_subcents integer DEFAULT 0 NOT NULL,
    tokens_in integer DEFAULT 0 NOT NULL,
    tokens_cached_in bigint DEFAULT 0 NOT NULL,
    tokens_out integer DEFAULT 0 NOT NULL,
    workspace_path text DEFAULT ''::text,
    name text DEFAULT ''::text,
    last_read_message_id text DEFAULT ''::text
);

CREATE TABLE @extschema@.task_session_turns (
    id text NOT NULL,
    task_session_id text NOT NULL,
    task_id text NOT NULL,
    started_at timestamp without time zone NOT NULL,
    completed_at timestamp without time zone,
    execution_profile_id text DEFAULT ''::text NOT NULL,
    route_generation bigint DEFAULT 0 NOT NULL,
    metadata text DEFAULT '{}'::text,
    created_at timestamp without time zone NOT NULL,
    updated_at timestamp without time zone NOT NULL
);

-- prompt_seq comes from a boot migration (ALTER … ADD COLUMN), so it lands after updated_at.
CREATE TABLE @extschema@.task_session_messages (
    id text NOT NULL,
    task_session_id text NOT NULL,
    task_id text DEFAULT ''::text,
    turn_id text NOT NULL,
    author_type text DEFAULT 'user'::text NOT NULL,
    author_id text DEFAULT ''::text,
    content text NOT NULL,
    requests_input integer DEFAULT 0,
    type text DEFAULT 'message'::text NOT NULL,
    metadata text DEFAULT '{}'::text,
    created_at timestamp without time zone NOT NULL,
    updated_at timestamp without time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    prompt_seq integer DEFAULT 0 NOT NULL
);

ALTER TABLE ONLY @extschema@.kandev_meta
    ADD CONSTRAINT kandev_meta_pkey PRIMARY KEY (key);

ALTER TABLE ONLY @extschema@.task_session_messages
    ADD CONSTRAINT task_session_messages_pkey PRIMARY KEY (id);

ALTER TABLE ONLY @extschema@.task_session_turns
    ADD CONSTRAINT task_session_turns_pkey PRIMARY KEY (id);

ALTER TABLE ONLY @extschema@.task_sessions
    ADD CONSTRAINT task_sessions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY @extschema@.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);

-- task_session_messages: 12 indexes (primary key included). idx_messages_turn (analytics) duplicates
-- idx_messages_turn_id, and idx_messages_session_id is a prefix of three others.
CREATE INDEX idx_messages_author_type ON @extschema@.task_session_messages USING btree (task_session_id, author_type, type);
CREATE INDEX idx_messages_created_at ON @extschema@.task_session_messages USING btree (created_at);
CREATE INDEX idx_messages_metadata_pending_id ON @extschema@.task_session_messages USING btree (task_session_id, (((metadata)::jsonb ->> 'pending_id'::text)));
CREATE INDEX idx_messages_metadata_tool_call_id ON @extschema@.task_session_messages USING btree (task_session_id, (((metadata)::jsonb ->> 'tool_call_id'::text)));
CREATE INDEX idx_messages_prompt_order ON @extschema@.task_session_messages USING btree (task_session_id, created_at, id);
CREATE INDEX idx_messages_session_created ON @extschema@.task_session_messages USING btree (task_session_id, created_at);
CREATE INDEX idx_messages_session_id ON @extschema@.task_session_messages USING btree (task_session_id);
CREATE INDEX idx_messages_session_updated ON @extschema@.task_session_messages USING btree (task_session_id, updated_at);
CREATE INDEX idx_messages_task_author_created ON @extschema@.task_session_messages USING btree (task_id, author_type, type, created_at DESC);
CREATE INDEX idx_messages_turn ON @extschema@.task_session_messages USING btree (turn_id);
CREATE INDEX idx_messages_turn_id ON @extschema@.task_session_messages USING btree (turn_id);

-- task_sessions: 7 indexes.
CREATE INDEX idx_sessions_agent_started ON @extschema@.task_sessions USING btree (agent_profile_id, started_at);
CREATE INDEX idx_sessions_repo ON @extschema@.task_sessions USING btree (repository_id);
CREATE INDEX idx_sessions_task_started ON @extschema@.task_sessions USING btree (task_id, started_at);
CREATE INDEX idx_task_sessions_state ON @extschema@.task_sessions USING btree (state);
CREATE INDEX idx_task_sessions_task_id ON @extschema@.task_sessions USING btree (task_id);
CREATE INDEX idx_task_sessions_task_state ON @extschema@.task_sessions USING btree (task_id, state);

-- tasks: 12 indexes.
CREATE INDEX idx_tasks_archived_at ON @extschema@.tasks USING btree (archived_at);
CREATE INDEX idx_tasks_project_id ON @extschema@.tasks USING btree (project_id);
CREATE INDEX idx_tasks_queued_for_step ON @extschema@.tasks USING btree (queued_for_step_id, queued_at);
CREATE INDEX idx_tasks_updated ON @extschema@.tasks USING btree (workspace_id, updated_at);
CREATE INDEX idx_tasks_workflow_id ON @extschema@.tasks USING btree (workflow_id);
CREATE INDEX idx_tasks_workflow_state ON @extschema@.tasks USING btree (workflow_step_id, state);
CREATE INDEX idx_tasks_workflow_step_id ON @extschema@.tasks USING btree (workflow_step_id);
CREATE INDEX idx_tasks_workspace_archived ON @extschema@.tasks USING btree (workspace_id, archived_at);
CREATE INDEX idx_tasks_workspace_created ON @extschema@.tasks USING btree (workspace_id, created_at);
CREATE INDEX idx_tasks_workspace_id ON @extschema@.tasks USING btree (workspace_id);
CREATE UNIQUE INDEX uniq_tasks_external_id ON @extschema@.tasks USING btree (workspace_id, external_id) WHERE (external_id IS NOT NULL);

-- task_session_turns: 6 indexes; idx_turns_task (analytics) duplicates idx_turns_task_id.
CREATE INDEX idx_turns_session_id ON @extschema@.task_session_turns USING btree (task_session_id);
CREATE INDEX idx_turns_session_started ON @extschema@.task_session_turns USING btree (task_session_id, started_at);
CREATE INDEX idx_turns_session_times ON @extschema@.task_session_turns USING btree (task_session_id, started_at, completed_at);
CREATE INDEX idx_turns_task ON @extschema@.task_session_turns USING btree (task_id);
CREATE INDEX idx_turns_task_id ON @extschema@.task_session_turns USING btree (task_id);

ALTER TABLE ONLY @extschema@.task_session_messages
    ADD CONSTRAINT task_session_messages_task_session_id_fkey FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions(id) ON DELETE CASCADE;

ALTER TABLE ONLY @extschema@.task_session_messages
    ADD CONSTRAINT task_session_messages_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES @extschema@.task_session_turns(id) ON DELETE CASCADE;

ALTER TABLE ONLY @extschema@.task_session_turns
    ADD CONSTRAINT task_session_turns_task_session_id_fkey FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions(id) ON DELETE CASCADE;

ALTER TABLE ONLY @extschema@.task_sessions
    ADD CONSTRAINT task_sessions_task_id_fkey FOREIGN KEY (task_id) REFERENCES @extschema@.tasks(id) ON DELETE CASCADE;
