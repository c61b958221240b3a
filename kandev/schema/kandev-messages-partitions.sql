-- A few partitions of the partitioned task_session_messages (kandev-messages-partitioned.sql), placed
-- around the server's clock so that both history and live writes land somewhere: one partition for all
-- of history before the previous month, then one per month for the previous, current and next month
-- (UTC, as the host's timestamps are), named task_session_messages_pYYYYMM. No default partition.
DO $partitions$
DECLARE
  this_month timestamp := date_trunc('month', clock_timestamp() AT TIME ZONE 'UTC');
  m timestamp;
BEGIN
  EXECUTE format('CREATE TABLE IF NOT EXISTS @extschema@.task_session_messages_history
                    PARTITION OF @extschema@.task_session_messages FOR VALUES FROM (MINVALUE) TO (%L)',
                 this_month - interval '1 month');
  FOR i IN -1..1 LOOP
    m := this_month + make_interval(months => i);
    EXECUTE format('CREATE TABLE IF NOT EXISTS @extschema@.%I
                      PARTITION OF @extschema@.task_session_messages FOR VALUES FROM (%L) TO (%L)',
                   'task_session_messages_p' || to_char(m, 'YYYYMM'), m, m + interval '1 month');
  END LOOP;
END
$partitions$;
