-- name: storage-order
-- description: Modules whose rows in one table lie before rows of a module with a smaller id.
-- param quoted_table VARCHAR = NULL: the table, as an SQL identifier quoted by quote_identifier
-- column module_id: Module.
-- column before_id: The smaller id whose rows come after.
-- note: Reads rowid, which query_table does not give; so the table's scan is built by query() from the quoted name, which comes from the declared schema, never from input.
WITH spans AS (
  SELECT module_id, min(stored_row) AS first_row, max(stored_row) AS last_row
  FROM query('SELECT module_id, rowid AS stored_row FROM ' || $quoted_table)
  GROUP BY module_id
),
ordered AS (
  SELECT
    module_id,
    first_row,
    max(last_row) OVER (
      ORDER BY module_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS before_last,
    arg_max(module_id, last_row) OVER (
      ORDER BY module_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS before_id
  FROM spans
)
SELECT module_id, before_id
FROM ordered
WHERE first_row < before_last
ORDER BY module_id
