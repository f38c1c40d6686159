-- name: oom-orphan-rows
-- description: Rows of a table with an event_id (oom_buffers, oom_labels, diagnostics) whose event is not in oom_events.
-- param table_name VARCHAR = NULL: the table searched
-- column event_id: The missing event.
-- column n: How many rows point at it.
SELECT event_id, count(*) AS n
FROM query_table($table_name)
WHERE event_id IS NOT NULL AND event_id NOT IN (SELECT event_id FROM oom_events)
GROUP BY event_id
ORDER BY event_id
