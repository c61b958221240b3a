-- Nesting of the subagents observed in the window: depth 0 is a subagent launched by the agent itself,
-- depth 1 one launched by a subagent, and so on; the tree is followed over all rows, so a parent from
-- before the window still counts. A nested subagent whose parent was not captured (in the same session
-- and execution) has depth NULL ("parent not captured"). Depth is capped at 32 so a cycle in bad data
-- cannot recurse forever.
WITH RECURSIVE tree AS (
  SELECT t.task_session_id, t.agent_execution_id, t.tool_call_id, 0 AS depth
    FROM @extschema@.task_session_subagents AS t
   WHERE t.parent_tool_call_id IS NULL
  UNION ALL
  SELECT c.task_session_id, c.agent_execution_id, c.tool_call_id, tree.depth + 1
    FROM tree
    JOIN @extschema@.task_session_subagents AS c
      ON c.task_session_id = tree.task_session_id
     AND c.agent_execution_id = tree.agent_execution_id
     AND c.parent_tool_call_id = tree.tool_call_id
   WHERE tree.depth < 32)
SELECT d.depth, count(*) AS subagents
  FROM @extschema@.task_session_subagents AS r
  LEFT JOIN (SELECT task_session_id, agent_execution_id, tool_call_id, min(depth) AS depth
               FROM tree GROUP BY 1, 2, 3) AS d
    ON d.task_session_id = r.task_session_id
   AND d.agent_execution_id = r.agent_execution_id
   AND d.tool_call_id = r.tool_call_id
 WHERE r.observed_at >= coalesce($1::timestamp, '-infinity') AND r.observed_at < coalesce($2::timestamp, 'infinity')
 GROUP BY d.depth
 ORDER BY d.depth NULLS LAST;
