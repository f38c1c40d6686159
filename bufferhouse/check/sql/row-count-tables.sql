-- name: row-count-tables
-- description: Modules whose recorded row_counts do not name exactly the per-module tables.
-- param expected VARCHAR[] = NULL: the per-module table names, sorted
-- column module_id: Module.
-- column recorded: The table names its row_counts holds, sorted.
SELECT module_id, list_sort(map_keys(row_counts)) AS recorded
FROM modules
WHERE recorded IS DISTINCT FROM $expected::VARCHAR[]
