-- What this installation and host offer the report, from the catalog: whether subagent_context_topology()
-- exists (0.1.0 had none: a plain server), and whether kandev's tasks table has a title column (a host
-- without one shows cards by id). $1 is the schema's name.
SELECT to_regprocedure(format('%I.subagent_context_topology()', $1::text)) IS NOT NULL AS has_topology,
       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                WHERE attrelid = to_regclass(format('%I.tasks', $1::text)) AND attname = 'title' AND NOT attisdropped) AS has_titles;
