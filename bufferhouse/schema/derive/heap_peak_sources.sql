-- name: heap_peak_sources
-- description: The heap-peak buffers of each color grouped by the op and source line that defined them: how many, their assigned and logical bytes.
-- param lo BIGINT = NULL: lowest module_id whose rows are derived
-- param hi BIGINT = NULL: highest module_id whose rows are derived
-- note: Reads heap_peak_buffers, so it runs after that table is written (file order follows the schema's DERIVED_TABLES).
-- note: Reads only the base rows of the modules with ids in [$lo, $hi]; the caller inserts the result into the table of this name.
SELECT
  b.module_id,
  b.color,
  i.op_name,
  i.source_file,
  i.source_line,
  count(*) AS buffers,
  CAST(sum(b.size) AS BIGINT) AS bytes,
  CAST(sum(b.logical_bytes) AS BIGINT) AS logical_bytes
FROM heap_peak_buffers AS b
JOIN hlo_values AS v
  ON v.module_id = b.module_id AND v.value_id = b.value_id
LEFT JOIN (
  SELECT module_id, instruction, op_name, source_file, source_line
  FROM instructions
  WHERE module_id BETWEEN $lo AND $hi
) AS i
  ON i.module_id = b.module_id AND i.instruction = v.instruction
WHERE b.module_id BETWEEN $lo AND $hi AND v.module_id BETWEEN $lo AND $hi
GROUP BY b.module_id, b.color, i.op_name, i.source_file, i.source_line
