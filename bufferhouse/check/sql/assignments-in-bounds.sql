-- name: assignments-in-bounds
-- description: Value slices that do not lie inside an allocation of their module.
-- column module_id: Module.
-- column value_id: The value.
-- column allocation_index: The allocation it is assigned to.
-- column byte_offset: Where its slice starts.
-- column size: The slice's size.
-- column allocation_size: The allocation's size; NULL when there is no such allocation.
SELECT
  s.module_id,
  s.value_id,
  s.allocation_index,
  s.byte_offset,
  s.size,
  a.size AS allocation_size
FROM assignments AS s
LEFT JOIN allocations AS a
  ON a.module_id = s.module_id AND a.allocation_index = s.allocation_index
WHERE
  a.size IS NULL
  OR s.byte_offset < 0
  OR s.size < 0
  OR s.byte_offset + s.size > a.size
ORDER BY 1, 2
