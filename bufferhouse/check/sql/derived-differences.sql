-- name: derived-differences
-- description: Per module, how many rows of one derived table differ from a recomputation from the module's base rows.
-- param table_name VARCHAR = NULL: the derived table compared
-- param lo BIGINT = NULL: lowest module_id compared
-- param hi BIGINT = NULL: highest module_id compared
-- column module_id: Module.
-- column differing: Rows in one side and not the other (with multiplicity).
-- note: The recomputation is the temporary table bh_check_want, filled beforehand by the schema's statement for this table (bufferhouse/schema/derive/*.sql) over the same ids.
WITH got AS (
  SELECT *
  FROM query_table($table_name)
  WHERE module_id BETWEEN $lo AND $hi
)
SELECT module_id, count(*) AS differing
FROM (
  (SELECT * FROM bh_check_want EXCEPT ALL SELECT * FROM got)
  UNION ALL
  (SELECT * FROM got EXCEPT ALL SELECT * FROM bh_check_want)
)
GROUP BY module_id
ORDER BY module_id
