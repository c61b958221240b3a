-- Nesting of the subagents observed in the window: depth 0 is a subagent launched by the agent itself,
-- depth 1 one launched by a subagent, and so on. Each row of the window walks up to its parent by the
-- table's unique key (task_session_id, agent_execution_id, tool_call_id), one index lookup a step, so the
-- cost follows the rows shown, not the history; a parent from before the window still counts. A nested
-- subagent whose parent was not captured (in the same session and execution) has depth NULL ("parent not
-- captured"), and so has one more than 32 steps from the agent: the cap stops a cycle in bad data.
WITH RECURSIVE r AS (
  SELECT task_session_id, agent_execution_id, tool_call_id, parent_tool_call_id
    FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity')),
up AS (
  -- (the row of the window, the parent still to find, the steps taken so far)
  SELECT task_session_id, agent_execution_id, tool_call_id, parent_tool_call_id AS parent, 0 AS steps
    FROM r
  UNION ALL
  SELECT up.task_session_id, up.agent_execution_id, up.tool_call_id, p.parent_tool_call_id, up.steps + 1
    FROM up
    JOIN @extschema@.task_session_subagents AS p
      ON p.task_session_id = up.task_session_id
     AND p.agent_execution_id = up.agent_execution_id
     AND p.tool_call_id = up.parent
   WHERE up.steps < 32)
-- A row reached the agent where its walk found no parent left: one such step at most per row.
SELECT reached.steps AS depth, count(*) AS subagents
  FROM r
  LEFT JOIN up AS reached
    ON reached.parent IS NULL
   AND reached.task_session_id = r.task_session_id
   AND reached.agent_execution_id = r.agent_execution_id
   AND reached.tool_call_id = r.tool_call_id
 GROUP BY reached.steps
 ORDER BY reached.steps NULLS LAST;
