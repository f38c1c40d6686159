-- name: stored-objects
-- description: The views and macros stored in the file, beside its tables (temporary and built-in ones left out).
-- column kind: view or macro.
-- column name: Its name.
SELECT
  'view' AS kind,
  view_name AS name
FROM duckdb_views()
WHERE NOT internal AND NOT temporary AND database_name = current_database()
UNION
SELECT
  'macro' AS kind,
  function_name AS name
FROM duckdb_functions()
WHERE
  function_type IN ('macro', 'table_macro')
  AND NOT internal
  AND database_name = current_database()
ORDER BY kind, name
