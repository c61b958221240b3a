-- kandev after 0.91: what its 0.92.1 schema dump and later boot migrations change on the host tables,
-- applied on top of kandev-0.91.sql as kandev's boot applies them to a 0.91 database (docs/integration.md,
-- "kandev after 0.91"). Capture derives nothing new from these; they change what kandev's own message
-- write costs, and a message may now have no turn.
-- @extschema@ is replaced with the target schema by the loader.

-- Session cost counters widened to bigint (the 0.92.1 dump).
ALTER TABLE @extschema@.task_sessions
    ALTER COLUMN cost_subcents TYPE bigint,
    ALTER COLUMN tokens_in TYPE bigint,
    ALTER COLUMN tokens_out TYPE bigint;
CREATE INDEX idx_tasks_parent_id ON @extschema@.tasks USING btree (parent_id);

-- Lifecycle-only messages are kept without manufacturing a turn.
ALTER TABLE @extschema@.task_session_messages ALTER COLUMN turn_id DROP NOT NULL;

-- Shell output over 4 kB moves out of metadata into a content-addressed payload table; the message keeps
-- a short summary, the digest and the size.
ALTER TABLE @extschema@.task_session_messages ADD COLUMN payload_digest text DEFAULT ''::text NOT NULL;
ALTER TABLE @extschema@.task_session_messages ADD COLUMN payload_size integer DEFAULT 0 NOT NULL;
CREATE TABLE @extschema@.task_message_payloads (
    digest text NOT NULL,
    compressed_content bytea NOT NULL,
    uncompressed_size integer NOT NULL,
    compressed_size integer NOT NULL,
    created_at timestamp without time zone NOT NULL
);
ALTER TABLE ONLY @extschema@.task_message_payloads
    ADD CONSTRAINT task_message_payloads_pkey PRIMARY KEY (digest);

-- Four more indexes on task_session_messages (16 in all), two more on the parsed metadata (four in all):
-- every message write now parses metadata for four index entries instead of two.
CREATE INDEX idx_messages_payload_digest ON @extschema@.task_session_messages USING btree (payload_digest);
CREATE INDEX idx_messages_prompt_user_order ON @extschema@.task_session_messages USING btree (task_session_id, author_type, created_at, id);
CREATE INDEX idx_messages_metadata_pending_id_lookup ON @extschema@.task_session_messages USING btree ((((metadata)::jsonb ->> 'pending_id'::text)));
CREATE INDEX idx_messages_metadata_pending_id_lookup_ordered ON @extschema@.task_session_messages USING btree ((((metadata)::jsonb ->> 'pending_id'::text)), created_at, id) WHERE (((metadata)::jsonb ->> 'pending_id'::text) IS NOT NULL);
