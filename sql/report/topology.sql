-- Where the installation runs: 'plain', 'partitioned' or 'citus' (nesting is not available on Citus).
-- Run only when host-features.sql found the function.
SELECT @extschema@.subagent_context_topology() AS topology;
