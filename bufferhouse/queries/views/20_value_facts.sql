-- name: value_facts
-- description: One row per placed value: its allocation, slice, logical size, padding, live range and the op and source line that made it.
-- column module_id: Module (modules.module_id).
-- column module_name: Module name (jit name).
-- column value_id: Value (hlo_values.value_id).
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column allocation_index: Allocation holding the value.
-- column category: Allocation kind: parameter, output, thread-local, constant or temp.
-- column color: Memory space of the allocation.
-- column byte_offset: Byte offset of the value's slice in the allocation.
-- column size: Assigned bytes of the slice (padded).
-- column logical_bytes: ByteSizeOf(shape): unpadded bytes.
-- column padding_bytes: size - logical_bytes (tile padding on TPU, dynamic-shape metadata on CPU/GPU).
-- column shape: Value shape with layout.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name (metadata op_name).
-- column source_file: Source file of the op.
-- column source_line: Source line of the op.
-- column start_time: First program-order step the value is live; NULL without a live range.
-- column end_time: Last program-order step the value is live (inclusive).
SELECT
  v.module_id,
  m.module_name,
  v.value_id,
  v.instruction,
  v.shape_index,
  a.allocation_index,
  al.category,
  al.color,
  a.byte_offset,
  a.size,
  v.logical_bytes,
  a.size - v.logical_bytes AS padding_bytes,
  v.shape,
  i.opcode,
  i.op_name,
  i.source_file,
  i.source_line,
  lr.start_time,
  lr.end_time
FROM hlo_values AS v
JOIN assignments AS a
  ON a.module_id = v.module_id AND a.value_id = v.value_id
JOIN allocations AS al
  ON al.module_id = a.module_id
  AND al.allocation_index = a.allocation_index
JOIN modules AS m
  ON m.module_id = v.module_id
LEFT JOIN instructions AS i
  ON i.module_id = v.module_id AND i.instruction = v.instruction
LEFT JOIN live_ranges AS lr
  ON lr.module_id = v.module_id AND lr.value_id = v.value_id
