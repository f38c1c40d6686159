-- name: row-counts
-- description: Modules whose rows in one per-module table differ in number from what ingest recorded in modules.row_counts.
-- param table_name VARCHAR = NULL: the per-module table counted
-- column module_id: Module.
-- column recorded: Rows recorded at ingest.
-- column actual: Rows the table holds now.
WITH actual AS (
  SELECT module_id, count(*) AS n
  FROM query_table($table_name)
  GROUP BY module_id
),
recorded AS (
  SELECT module_id, k, v
  FROM (
    SELECT
      module_id,
      unnest(map_keys(row_counts)) AS k,
      unnest(map_values(row_counts)) AS v
    FROM modules
  )
  WHERE k = $table_name
)
SELECT m.module_id, r.v AS recorded, coalesce(a.n, 0) AS actual
FROM modules AS m
LEFT JOIN recorded AS r USING (module_id)
LEFT JOIN actual AS a USING (module_id)
WHERE r.v IS NOT NULL AND r.v <> coalesce(a.n, 0)
ORDER BY m.module_id
