-- name: heap_trace_steps
-- description: Every heap-simulator event of each module and memory space, numbered in trace order, with the bytes XLA holds after it: the curve XProf's memory viewer draws.
-- column module_id: Module (modules.module_id).
-- column color: Memory space (color) of the trace.
-- column step: Position of the event among the module's events in this space (trace order, then event order), from 0.
-- column trace_index: Trace of the buffer assignment (heap_events.trace_index).
-- column event_index: Order of the event in its trace.
-- column kind: ALLOC, FREE or SHARE_WITH.
-- column instruction: Instruction the simulator was processing.
-- column value_id: Logical buffer of the event (hlo_values.value_id).
-- column size: Bytes of that buffer.
-- column heap_bytes: Bytes in use in the trace's heap after the event (shared buffers once).
-- column static_bytes: The bytes held throughout: the space's indefinite allocations (heap_peaks.indefinite_bytes).
-- column live_bytes: static_bytes + heap_bytes.
-- column is_trace_peak: The event is the first to reach its trace's highest heap_bytes.
-- column is_peak: The event is the first (lowest step) to reach the space's highest heap_bytes: the module's peak in this space.
-- note: The one reading of the trace: heap-trace and heap-timeline build on it. static_bytes is what the live-range figure counts besides the temp bytes too (every parameter, output, constant and thread-local allocation at its size), so the highest live_bytes is heap_peaks.heap_peak_bytes, whichever form carried the module.
WITH numbered AS (
  SELECT
    e.module_id,
    e.color,
    e.trace_index,
    e.event_index,
    e.kind,
    e.instruction,
    e.value_id,
    e.size,
    e.heap_bytes,
    row_number() OVER (
      PARTITION BY e.module_id, e.color
      ORDER BY e.trace_index, e.event_index
    ) - 1 AS step
  FROM heap_events AS e
),
firsts AS (
  SELECT
    n.*,
    bh_peak_first(n.step, n.heap_bytes) OVER (
      PARTITION BY n.module_id, n.color, n.trace_index
    ) AS trace_peak_step,
    bh_peak_first(n.step, n.heap_bytes) OVER (
      PARTITION BY n.module_id, n.color
    ) AS peak_step
  FROM numbered AS n
)
SELECT
  f.module_id,
  f.color,
  f.step,
  f.trace_index,
  f.event_index,
  f.kind,
  f.instruction,
  f.value_id,
  f.size,
  f.heap_bytes,
  p.indefinite_bytes AS static_bytes,
  p.indefinite_bytes + f.heap_bytes AS live_bytes,
  f.step = f.trace_peak_step AS is_trace_peak,
  f.step = f.peak_step AS is_peak
FROM firsts AS f
JOIN heap_peaks AS p
  ON p.module_id = f.module_id AND p.color = f.color
