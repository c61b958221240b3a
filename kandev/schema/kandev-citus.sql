-- kandev's tables distributed on a Citus cluster (docs/citus.md, step 1), on the coordinator, after
-- kandev-host.sql created them as plain tables. Co-located on task_session_id: a session's messages,
-- turns and subagent rows live on one node, so capture's upsert is a local write next to the message.
-- Citus needs every primary key and unique key of a distributed table to include the distribution
-- column, and foreign keys between distributed tables to include it on both sides; a reference table
-- (tasks) cannot be the target while local tables still point at it. So: drop the foreign keys,
-- widen the keys, distribute, then add the foreign keys back in their co-located form.
ALTER TABLE @extschema@.task_session_messages DROP CONSTRAINT task_session_messages_task_session_id_fkey;
ALTER TABLE @extschema@.task_session_messages DROP CONSTRAINT task_session_messages_turn_id_fkey;
ALTER TABLE @extschema@.task_session_turns DROP CONSTRAINT task_session_turns_task_session_id_fkey;
ALTER TABLE @extschema@.task_sessions DROP CONSTRAINT task_sessions_task_id_fkey;
ALTER TABLE @extschema@.task_session_messages DROP CONSTRAINT task_session_messages_pkey;
ALTER TABLE @extschema@.task_session_messages ADD PRIMARY KEY (task_session_id, id);
ALTER TABLE @extschema@.task_session_turns DROP CONSTRAINT task_session_turns_pkey;
ALTER TABLE @extschema@.task_session_turns ADD PRIMARY KEY (task_session_id, id);
SELECT create_reference_table('@extschema@.kandev_meta');
SELECT create_reference_table('@extschema@.tasks');
SELECT create_distributed_table('@extschema@.task_sessions', 'id');
SELECT create_distributed_table('@extschema@.task_session_turns', 'task_session_id', colocate_with => '@extschema@.task_sessions');
SELECT create_distributed_table('@extschema@.task_session_messages', 'task_session_id', colocate_with => '@extschema@.task_sessions');
ALTER TABLE @extschema@.task_sessions ADD FOREIGN KEY (task_id) REFERENCES @extschema@.tasks (id) ON DELETE CASCADE;
ALTER TABLE @extschema@.task_session_turns ADD FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE;
ALTER TABLE @extschema@.task_session_messages ADD FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE;
ALTER TABLE @extschema@.task_session_messages ADD FOREIGN KEY (task_session_id, turn_id) REFERENCES @extschema@.task_session_turns (task_session_id, id) ON DELETE CASCADE;
