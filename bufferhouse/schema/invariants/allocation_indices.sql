-- check: allocations well formed
-- description: An allocation index is listed once per module.
-- column a: The allocation index.
-- column b: How many allocations carry it.
SELECT
  module_id,
  allocation_index AS a,
  count(*) AS b,
  'allocation index ' || allocation_index || ' is listed ' || count(*) || ' times' AS problem
FROM allocations
WHERE module_id BETWEEN $lo AND $hi
GROUP BY module_id, allocation_index
HAVING count(*) > 1
ORDER BY 1, 2
