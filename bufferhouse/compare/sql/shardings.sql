-- name: diff-shardings
-- description: The shardings of the given modules' entry parameters and results (the `shardings` rows of any form of each compile), for the causes of a diff.
-- param ids BIGINT[] = NULL: The modules (modules.module_id; a compile's primary module).
-- column module_id: Module (the compile's primary module).
-- column target: parameter or output.
-- column parameter: `N{index}` of an entry parameter's array (as diff-values' parameter), else NULL.
-- column shape_index: ShapeIndex within the parameter or the result.
-- column sharding: The sharding as XLA prints it.
-- column tiles: Pieces each dimension is cut into; NULL when not split by dimension.
-- note: A compile read in several forms (text and proto, a profile) has its shardings from the proto's; the rows of one compile's forms are the same, one is kept.
SELECT DISTINCT ON (c.primary_module_id, s.target, s.number, s.shape_index)
  c.primary_module_id AS module_id,
  s.target,
  CASE
    WHEN s.target = 'parameter'
      THEN CAST(s.number AS VARCHAR) || s.shape_index
  END AS parameter,
  s.shape_index,
  s.sharding,
  s.tiles
FROM shardings AS s
JOIN compile_modules AS c
  ON c.module_id = s.module_id
WHERE c.primary_module_id IN (SELECT unnest($ids))
  AND s.target IN ('parameter', 'output')
ORDER BY c.primary_module_id, s.target, s.number, s.shape_index, s.module_id
