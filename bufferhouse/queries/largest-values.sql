-- name: largest-values
-- description: The biggest buffers in the fleet, with their module and provenance.
-- param top INTEGER >= 0 = 50: How many values.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column value_id: Value id.
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column category: Allocation kind.
-- column color: Memory space.
-- column size: Assigned bytes.
-- column logical_bytes: Unpadded bytes.
-- column shape: Value shape with layout.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name.
-- column source: source_file:source_line, NULL if unknown.
WITH wanted AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
-- each large table is read scoped to the module: see docs/query-planning.md
cutoff AS (
  SELECT min(size) AS size
  FROM (
    SELECT size FROM assignments WHERE $module IS NULL
    UNION ALL
    SELECT size FROM assignments
    WHERE module_id IN (SELECT module_id FROM wanted)
    ORDER BY size DESC
    LIMIT $top
  )
),
-- many values tie at the cutoff (one shape in many modules) and module names
-- break the ties, so modules are ranked first, from two narrow columns: the
-- winners' modules are among the first `top` by largest value, then name
contenders AS (
  SELECT module_id, max(size) AS size
  FROM assignments
  WHERE $module IS NULL AND size >= (SELECT size FROM cutoff)
  GROUP BY module_id
  UNION ALL
  SELECT module_id, max(size)
  FROM assignments
  WHERE
    module_id IN (SELECT module_id FROM wanted)
    AND size >= (SELECT size FROM cutoff)
  GROUP BY module_id
),
chosen AS (
  SELECT c.module_id, m.module_name
  FROM contenders AS c
  JOIN modules AS m
    ON m.module_id = c.module_id
  ORDER BY c.size DESC, m.module_name, c.module_id
  LIMIT $top
),
ranked AS (
  SELECT a.module_id, m.module_name, a.value_id, a.allocation_index, a.size
  FROM assignments AS a
  JOIN chosen AS m
    ON m.module_id = a.module_id
  WHERE a.size >= (SELECT size FROM cutoff)
  ORDER BY a.size DESC, m.module_name, a.module_id, a.value_id
  LIMIT $top
),
ranked_modules AS (
  SELECT DISTINCT module_id FROM ranked
)
SELECT
  r.module_id,
  r.module_name,
  r.value_id,
  v.instruction,
  v.shape_index,
  al.category,
  al.color,
  r.size,
  v.logical_bytes,
  v.shape,
  i.opcode,
  i.op_name,
  i.source_file || ':' || CAST(i.source_line AS VARCHAR) AS source
FROM ranked AS r
JOIN hlo_values AS v
  ON v.module_id = r.module_id AND v.value_id = r.value_id
JOIN allocations AS al
  ON al.module_id = r.module_id
  AND al.allocation_index = r.allocation_index
LEFT JOIN (
  SELECT
    module_id, instruction, opcode, op_name, source_file, source_line
  FROM instructions
  WHERE module_id IN (SELECT module_id FROM ranked_modules)
) AS i
  ON i.module_id = r.module_id AND i.instruction = v.instruction
WHERE
  v.module_id IN (SELECT module_id FROM ranked_modules)
  AND al.module_id IN (SELECT module_id FROM ranked_modules)
ORDER BY r.size DESC, r.module_name, r.module_id, r.value_id
