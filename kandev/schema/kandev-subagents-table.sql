-- task_session_subagents as kandev >= 0.89 creates it itself (docs/install.md), as pg_dump prints it:
-- integer metrics, agent_execution_id DEFAULT 'unknown', no foreign key on turn_id, and kandev's three
-- idx_subagents_* indexes. kandev's own writer fills it with real execution ids.
CREATE TABLE @extschema@.task_session_subagents (
    id text NOT NULL,
    task_session_id text NOT NULL,
    task_id text NOT NULL,
    turn_id text,
    tool_call_id text NOT NULL,
    agent_execution_id text DEFAULT 'unknown'::text NOT NULL,
    parent_tool_call_id text,
    subagent_type text,
    description text,
    agent_id text,
    child_session_id text,
    model text,
    agent_status text,
    tool_status text,
    is_async integer DEFAULT 0 NOT NULL,
    total_tokens integer,
    tool_use_count integer,
    duration_ms integer,
    source text DEFAULT 'live'::text NOT NULL,
    observed_at timestamp without time zone NOT NULL,
    settled_at timestamp without time zone,
    updated_at timestamp without time zone NOT NULL
);

ALTER TABLE ONLY @extschema@.task_session_subagents
    ADD CONSTRAINT task_session_subagents_pkey PRIMARY KEY (id);

ALTER TABLE ONLY @extschema@.task_session_subagents
    ADD CONSTRAINT task_session_subagents_task_session_id_agent_execution_id_t_key UNIQUE (task_session_id, agent_execution_id, tool_call_id);

CREATE INDEX idx_subagents_session_id ON @extschema@.task_session_subagents USING btree (task_session_id);
CREATE INDEX idx_subagents_task_id ON @extschema@.task_session_subagents USING btree (task_id);
CREATE INDEX idx_subagents_turn_id ON @extschema@.task_session_subagents USING btree (turn_id);

ALTER TABLE ONLY @extschema@.task_session_subagents
    ADD CONSTRAINT task_session_subagents_task_session_id_fkey FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions(id) ON DELETE CASCADE;
