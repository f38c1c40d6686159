-- name: diff-signatures
-- description: Each module's parameter signature: its entry parameters' numbers, ShapeIndexes and shapes without layout, the shapes JAX keys a compiled jit on.
-- param ids BIGINT[] = NULL: The modules (modules.module_id).
-- column module_id: Module.
-- column signature: `number{index}:shape` of every parameter allocation, joined by `;` in parameter order; empty without parameters.
SELECT
  m.module_id,
  coalesce(
    string_agg(
      CAST(a.parameter_number AS VARCHAR)
      || coalesce(a.parameter_shape_index, '')
      || ':'
      || coalesce(a.parameter_shape, '?'),
      ';'
      ORDER BY a.parameter_number, a.parameter_shape_index, a.allocation_index
    ),
    ''
  ) AS signature
FROM modules AS m
LEFT JOIN allocations AS a
  ON a.module_id = m.module_id AND a.is_parameter
WHERE m.module_id IN (SELECT unnest($ids))
GROUP BY m.module_id
ORDER BY m.module_id
