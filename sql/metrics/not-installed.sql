-- The verdict where there is no subagent_context_health() to ask (no installation, or one removed by hand
-- halfway; docs/health.md#status): trigger_orphaned when the capture trigger was left behind on
-- task_session_messages, else not_installed. Read by `health` and the exporter alike; it calls no
-- function of ours, so it runs on any schema that holds kandev's tables.
SELECT CASE WHEN t.trigger_installed THEN 'trigger_orphaned' ELSE 'not_installed' END AS status, t.trigger_installed
  FROM (SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS g
                        WHERE g.tgrelid = pg_catalog.to_regclass('@extschema@.task_session_messages')
                          AND g.tgname = 'subagent_context_capture') AS trigger_installed) AS t
