-- name: module-counts
-- description: Modules whose allocation_count or value_count differs from the rows of allocations or hlo_values.
-- column module_id: Module.
-- column what: allocation_count or value_count.
-- column recorded: The count in modules.
-- column actual: The rows there are.
SELECT
  m.module_id,
  'allocation_count' AS what,
  m.allocation_count AS recorded,
  count(a.module_id) AS actual
FROM modules AS m
LEFT JOIN allocations AS a USING (module_id)
GROUP BY m.module_id, m.allocation_count
HAVING m.allocation_count IS DISTINCT FROM count(a.module_id)
UNION ALL
SELECT m.module_id, 'value_count', m.value_count, count(v.module_id)
FROM modules AS m
LEFT JOIN hlo_values AS v USING (module_id)
GROUP BY m.module_id, m.value_count
HAVING m.value_count IS DISTINCT FROM count(v.module_id)
ORDER BY 1, 2
