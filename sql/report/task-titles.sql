-- The titles of the cards (kandev's tasks) the report names. Run only when the host has tasks.title.
SELECT id, title FROM @extschema@.tasks WHERE id = ANY ($1::text[]);
