-- name: heap-trace
-- description: One module's heap as XLA's heap simulator ran it (source: the heap-simulator trace of a proto or profile): every event with the bytes in use after it, and the buffers live at the trace's peak.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix (required).
-- param space INTEGER >= 0 = 0: Memory space (color) of the trace.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column trace_index: Trace of the buffer assignment.
-- column event_index: Order of the event in its trace.
-- column kind: ALLOC, FREE or SHARE_WITH.
-- column instruction: Instruction the simulator was processing.
-- column value_id: Logical buffer of the event (hlo_values.value_id).
-- column size: Bytes of that buffer.
-- column heap_bytes: Bytes in use in the trace's heap after the event (shared buffers once).
-- column static_bytes: The bytes held throughout: the space's indefinite allocations (heap_peaks.indefinite_bytes).
-- column live_bytes: static_bytes + heap_bytes: the curve XProf's memory viewer draws.
-- column is_peak: The event reaches the trace's peak (first maximum).
-- note: Text dumps have no trace (no rows): heap-timeline sweeps their live ranges instead, and draws this trace (one row per event) for a module that has one. The heap_trace_steps view defines the same rows for every module; this query reads heap_events scoped to the module (see docs/query-planning.md). The maximum of live_bytes is heap_peaks.heap_peak_bytes; XLA's own figure over the same trace is modules.trace_peak_bytes.
-- example: bufferhouse query heap-trace --param module=jit_train_step --format csv
WITH chosen AS (
  SELECT m.module_id, m.module_name
  FROM modules AS m
  WHERE
    m.module_name = coalesce($module, error('heap-trace needs a module'))
    OR bh_is_module(
      $module, m.module_name, m.file_stem, m.module_id, m.content_hash
    )
),
events AS (
  SELECT
    e.module_id,
    e.trace_index,
    e.event_index,
    e.kind,
    e.instruction,
    e.value_id,
    e.size,
    e.heap_bytes
  FROM heap_events AS e
  WHERE
    e.color = $space
    AND e.module_id IN (SELECT module_id FROM chosen)
),
first_peak AS (
  SELECT
    module_id,
    trace_index,
    bh_peak_first(event_index, heap_bytes) AS event_index
  FROM events
  GROUP BY module_id, trace_index
)
SELECT
  c.module_id,
  c.module_name,
  e.trace_index,
  e.event_index,
  e.kind,
  e.instruction,
  e.value_id,
  e.size,
  e.heap_bytes,
  h.indefinite_bytes AS static_bytes,
  h.indefinite_bytes + e.heap_bytes AS live_bytes,
  p.event_index IS NOT NULL AS is_peak
FROM events AS e
JOIN chosen AS c
  ON c.module_id = e.module_id
JOIN heap_peaks AS h
  ON h.module_id = e.module_id AND h.color = $space
LEFT JOIN first_peak AS p
  ON p.module_id = e.module_id
  AND p.trace_index = e.trace_index
  AND p.event_index = e.event_index
ORDER BY c.module_id, e.trace_index, e.event_index
