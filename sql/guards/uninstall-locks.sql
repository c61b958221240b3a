-- Before guards/lock-host.sql in the uninstall transaction: the lock it takes. DROP TRIGGER and DROP INDEX
-- take task_session_messages whole, so lock-host.sql takes that lock first, with its bounded waits; without
-- this setting it takes what install and upgrade need. Internal. Transaction-local, like every setting of ours.
SET LOCAL subagent_context.host_locks = 'task_session_messages:ACCESS EXCLUSIVE';
