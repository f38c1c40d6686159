-- check: values well formed
-- description: A value's ShapeIndex has no negative element (it indexes a tuple).
-- column a: The value id.
-- column b: NULL.
SELECT
  module_id,
  value_id AS a,
  NULL::BIGINT AS b,
  'value ' || value_id || ' has ShapeIndex ' || shape_index || ', with a negative element'
    AS problem
FROM hlo_values
WHERE module_id BETWEEN $lo AND $hi AND contains(shape_index, '-')
ORDER BY 1, 2
