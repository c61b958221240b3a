-- task_session_subagents' foreign key to kandev's task_sessions (its rows go with their session), added
-- when this transaction created the table (data/table.sql says so). Data layer. It comes after
-- guards/lock-host.sql: adding it takes a SHARE ROW EXCLUSIVE lock on task_sessions, which must not queue
-- kandev's writers behind a long transaction there, nor hold them while the code layer is created.
DO $foreign_key$
BEGIN
  IF pg_catalog.current_setting('subagent_context.table_created', true) = 'true' THEN
    ALTER TABLE @extschema@.task_session_subagents
      ADD CONSTRAINT task_session_subagents_task_session_id_fkey
      FOREIGN KEY (task_session_id) REFERENCES @extschema@.task_sessions (id) ON DELETE CASCADE;
  END IF;
END
$foreign_key$;
