-- name: stored-tables
-- description: The tables stored in the file (a file made by `bufferhouse attach` has views instead).
-- column table_name: Table.
SELECT table_name
FROM duckdb_tables()
