-- check: allocations well formed
-- description: An allocation's size is not negative.
-- column a: The allocation index.
-- column b: Its size.
SELECT
  module_id,
  allocation_index AS a,
  size AS b,
  'allocation ' || allocation_index || ' has size ' || size || ', which is negative' AS problem
FROM allocations
WHERE module_id BETWEEN $lo AND $hi AND size < 0
ORDER BY 1, 2
