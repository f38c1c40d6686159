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
-- column live_at_peak: A temp value held at the peak (per the trace, else its live range covers the peak step); false for the row of an indefinite allocation, which counts whole.
-- note: Indefinite allocations (parameters, outputs, constants, thread-local) count whole in the heap peak: each is one row, its largest value (lowest value_id on a tie), in every form of a compile (a text dump, its proto and a profile list the same rows).
-- note: Tuple-shaped values in temp allocations (pointer tables XLA never heap-simulates) are not listed, as the heap peak leaves them out.
-- note: The sizes sum to heap_peaks.heap_peak_bytes, unless temp values held at once share a slice (then the sum exceeds it by the shared bytes).
-- note: The membership rule runs at ingest (bufferhouse/schema/derive.py) and is stored in heap_peak_buffers; this view adds the names and text.
SELECT
  b.module_id,
  m.module_name,
  b.color,
  b.peak_time,
  b.value_id,
  v.instruction,
  v.shape_index,
  b.allocation_index,
  b.category,
  b.size,
  b.logical_bytes,
  b.size - b.logical_bytes AS padding_bytes,
  v.shape,
  i.opcode,
  i.op_name,
  i.source_file,
  i.source_line,
  b.live_at_peak
FROM heap_peak_buffers AS b
JOIN modules AS m
  ON m.module_id = b.module_id
JOIN hlo_values AS v
  ON v.module_id = b.module_id AND v.value_id = b.value_id
LEFT JOIN instructions AS i
  ON i.module_id = b.module_id AND i.instruction = v.instruction
