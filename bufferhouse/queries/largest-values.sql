-- name: largest-values
-- description: The biggest buffers in the fleet, with their module and provenance.
-- param top INTEGER = 50: How many values.
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
SELECT
  module_id,
  module_name,
  value_id,
  instruction,
  shape_index,
  category,
  color,
  size,
  logical_bytes,
  shape,
  opcode,
  op_name,
  source_file || ':' || CAST(source_line AS VARCHAR) AS source
FROM value_facts
WHERE
  $module IS NULL
  OR module_id IN (SELECT module_id FROM module_keys WHERE key = $module)
ORDER BY size DESC, module_name, module_id, value_id
LIMIT $top
