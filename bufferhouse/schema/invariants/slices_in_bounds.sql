-- check: assignments in bounds
-- description: A value's slice lies inside an allocation of its module.
-- column a: The value id.
-- column b: The allocation index it is assigned to.
SELECT
  s.module_id,
  s.value_id AS a,
  s.allocation_index AS b,
  'value ' || s.value_id || ': ' || CASE
    WHEN al.size IS NULL THEN 'allocation ' || s.allocation_index || ' does not exist'
    WHEN s.byte_offset < 0 OR s.size < 0
      THEN 'offset ' || s.byte_offset || ' and size ' || s.size || ' must not be negative'
    ELSE 'offset ' || s.byte_offset || ' + size ' || s.size || ' is past the size '
      || al.size || ' of allocation ' || s.allocation_index
  END AS problem
FROM assignments AS s
LEFT JOIN (
  SELECT module_id, allocation_index, max(size) AS size
  FROM allocations
  WHERE module_id BETWEEN $lo AND $hi
  GROUP BY ALL
) AS al
  ON al.module_id = s.module_id AND al.allocation_index = s.allocation_index
WHERE
  s.module_id BETWEEN $lo AND $hi
  AND (
    al.size IS NULL
    OR s.byte_offset < 0
    OR s.size < 0
    OR s.byte_offset::HUGEINT + s.size > al.size
  )
ORDER BY 1, 2
