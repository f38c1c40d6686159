-- name: stored-columns
-- description: Every column of every table of the warehouse, in declaration order, to compare with the declared schema.
-- column table_name: Table.
-- column column_name: Column.
-- column data_type: DuckDB's name of its type.
SELECT table_name, column_name, data_type
FROM duckdb_columns()
WHERE schema_name = 'main'
ORDER BY table_name, column_index
