-- name: any-table
-- description: One row when the file holds any table (a warehouse created but never initialised holds none).
-- column present: Always 1.
SELECT 1 AS present
FROM duckdb_tables()
LIMIT 1
