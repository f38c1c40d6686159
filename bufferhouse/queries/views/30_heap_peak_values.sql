-- name: heap_peak_values
-- description: Values that make up each module's heap peak, per memory space: temp values live at the peak step, and the values of the indefinite allocations.
-- column module_id: Module (modules.module_id).
-- column module_name: Module name (jit name).
-- column color: Memory space.
-- column peak_time: Program-order step of the heap peak (heap_peaks.peak_time).
-- column value_id: Value (hlo_values.value_id).
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column allocation_index: Allocation holding the value.
-- column category: Allocation kind: parameter, output, thread-local, constant or temp.
-- column size: Assigned bytes of the value's slice.
-- column logical_bytes: Unpadded bytes of the value's shape.
-- column padding_bytes: size - logical_bytes.
-- column shape: Value shape with layout.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name (metadata op_name).
-- column source_file: Source file of the op.
-- column source_line: Source line of the op.
-- column live_at_peak: The value's live range covers the peak step; false for the one value shown for an indefinite allocation none of whose values is live then.
-- note: Indefinite allocations (parameters, outputs, constants, thread-local) count whole in the heap peak. Each contributes its values live at the peak step, or, when none is (or there are no live ranges), its largest value, as XProf's memory viewer does.
-- note: Sizes of aliased values repeat their shared slice, so the sum of `size` can exceed heap_peaks.heap_peak_bytes.
WITH facts AS (
  SELECT
    f.*,
    p.peak_time,
    p.peak_time IS NOT NULL
    AND (
      (f.start_time IS NULL AND f.category = 'temp')
      OR p.peak_time BETWEEN f.start_time AND f.end_time
    ) AS live_at_peak
  FROM value_facts AS f
  JOIN heap_peaks AS p
    ON p.module_id = f.module_id AND p.color = f.color
),
ranked AS (
  SELECT
    *,
    bool_or(live_at_peak) OVER (
      PARTITION BY module_id, allocation_index
    ) AS allocation_live,
    row_number() OVER (
      PARTITION BY module_id, allocation_index
      ORDER BY size DESC, value_id
    ) AS size_rank
  FROM facts
)
SELECT
  module_id,
  module_name,
  color,
  peak_time,
  value_id,
  instruction,
  shape_index,
  allocation_index,
  category,
  size,
  logical_bytes,
  padding_bytes,
  shape,
  opcode,
  op_name,
  source_file,
  source_line,
  live_at_peak
FROM ranked
WHERE
  live_at_peak
  OR (category <> 'temp' AND NOT allocation_live AND size_rank = 1)
