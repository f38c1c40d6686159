-- name: oom-negative-sizes
-- description: Negative amounts of memory in OOM events: a figure that is not a difference, or a buffer's size, unpadded size or padding. Ingest stores none (a diagnostic instead).
-- param signed VARCHAR[] = NULL: names of the figures that are differences and may be negative (last part of the figure key)
-- column event_id: The event.
-- column what: `figure KEY` or `buffer RANK FIELD`.
-- column bytes: The negative value.
SELECT event_id, 'figure ' || f.key AS what, f.value AS bytes
FROM (SELECT event_id, unnest(map_entries(figures)) AS f FROM oom_events)
WHERE f.value < 0 AND NOT list_contains($signed::VARCHAR[], string_split(f.key, '/')[-1])
UNION ALL
SELECT event_id, 'buffer ' || rank || ' ' || field AS what, bytes
FROM oom_buffers
UNPIVOT (bytes FOR field IN (size_bytes, unpadded_bytes, padding_bytes))
WHERE bytes < 0
ORDER BY event_id, what
