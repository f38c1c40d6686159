-- check: heap trace
-- description: A heap-simulator trace names an allocation of its module.
-- column a: The trace index.
-- column b: The allocation index it names.
SELECT DISTINCT
  e.module_id,
  e.trace_index AS a,
  e.allocation_index AS b,
  'trace ' || e.trace_index || ' names allocation ' || e.allocation_index
    || ', which does not exist' AS problem
FROM heap_events AS e
ANTI JOIN allocations AS al
  ON al.module_id = e.module_id AND al.allocation_index = e.allocation_index
WHERE e.module_id BETWEEN $lo AND $hi AND e.allocation_index IS NOT NULL
ORDER BY 1, 2
