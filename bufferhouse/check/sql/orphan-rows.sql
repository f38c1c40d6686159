-- name: orphan-rows
-- description: Rows of one per-module table whose module is not in modules.
-- param table_name VARCHAR = NULL: the table searched
-- column module_id: The missing module.
-- column n: How many rows point at it.
SELECT module_id, count(*) AS n
FROM query_table($table_name)
WHERE module_id NOT IN (SELECT module_id FROM modules)
GROUP BY module_id
ORDER BY module_id
