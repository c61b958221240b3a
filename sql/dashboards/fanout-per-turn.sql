-- Fan-out per turn: how many turns launched exactly N subagents in the window (nested ones included:
-- they run in the same turn). Turns that launched none are not listed; rows without a turn_id are left out.
WITH r AS (
  SELECT * FROM @extschema@.task_session_subagents
   WHERE observed_at >= coalesce($1::timestamp, '-infinity') AND observed_at < coalesce($2::timestamp, 'infinity'))
SELECT fanout, count(*) AS turns
  FROM (SELECT turn_id, count(*) AS fanout FROM r WHERE turn_id IS NOT NULL GROUP BY turn_id) AS per_turn
 GROUP BY fanout
 ORDER BY fanout;
