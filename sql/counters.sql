-- Capture statistics: the six counters (data layer: kept across upgrades; read by stats.sql).
-- Counted per qualifying message write (docs/decisions.md#stats).
--
-- Each counter is a sequence. nextval() never waits for another transaction and never takes a row lock,
-- so concurrent writers do not serialize on a hot counter row the way an UPDATE of a stats table would.
-- The price: counters are NOT transactional. A rolled-back message write still counts as attempted and
-- as whatever outcome it reached, and a counter moves even when the row it describes was rolled back.
--
-- @counter_sequences@ is their names as a text[] (one list, sql/loader.js COUNTERS: this file,
-- uninstall.sql and the Citus worker steps of topology*.sql use it; stats.sql reads each by name and
-- capture.sql advances each by name).
DO $counters$
DECLARE
  seq text;
BEGIN
  FOREACH seq IN ARRAY @counter_sequences@ LOOP
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %s.%I', '@extschema@', seq);
  END LOOP;
  EXECUTE (SELECT 'REVOKE ALL ON SEQUENCE ' || string_agg(format('%s.%I', '@extschema@', s), ', ') || ' FROM PUBLIC'
             FROM unnest(@counter_sequences@) AS s);
END
$counters$;
