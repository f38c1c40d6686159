-- name: trace_peak_values
-- description: The buffers XLA holds at each module's trace peak, per memory space: those between their ALLOC (or SHARE_WITH) and their FREE at the peak event, and what XLA holds throughout.
-- column module_id: Module (modules.module_id).
-- column color: Memory space of the trace.
-- column peak_time: heap_trace_steps.step of the peak event (heap-timeline's time of the peak).
-- column value_id: Value (hlo_values.value_id).
-- column allocation_index: Allocation holding the value.
-- column category: Allocation kind: parameter, output, thread-local, constant or temp.
-- column size: Assigned bytes of the value's slice.
-- column logical_bytes: Unpadded bytes of the value's shape.
-- column live_at_peak: Always true: every listed value is held at the peak.
-- note: What XLA holds throughout is, as ComputePeakMemorySizes counts it, the largest value of each parameter, constant and output allocation of the space (lowest value_id on a tie; thread-local allocations left out). A buffer shared with another (SHARE_WITH) is listed with the size of the slice it shares, so the sum of `size` can exceed the peak.
-- note: Same columns as heap_peak_buffers (the live-range rule): peak-buffers reads this view for a module with a trace in the space, that table otherwise.
WITH peaks AS (
  SELECT module_id, color, trace_index, event_index, step
  FROM heap_trace_steps
  WHERE is_peak
),
held AS (
  -- a buffer is held at the peak when it was allocated (or shared) more often
  -- than freed up to and including the peak event
  SELECT e.module_id, e.color, p.step AS peak_time, e.value_id
  FROM heap_events AS e
  JOIN peaks AS p
    ON p.module_id = e.module_id
    AND p.color = e.color
    AND p.trace_index = e.trace_index
  WHERE e.event_index <= p.event_index
  GROUP BY e.module_id, e.color, p.step, e.value_id
  HAVING
    sum(CASE WHEN e.kind = 'FREE' THEN -1 ELSE 1 END) > 0
),
throughout AS (
  SELECT
    a.module_id,
    al.color,
    p.step AS peak_time,
    a.value_id,
    row_number() OVER (
      PARTITION BY a.module_id, a.allocation_index
      ORDER BY a.size DESC, a.value_id
    ) AS size_rank
  FROM assignments AS a
  JOIN allocations AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
  JOIN peaks AS p
    ON p.module_id = al.module_id AND p.color = al.color
  WHERE
    NOT al.is_thread_local
    AND (al.is_parameter OR al.is_constant OR al.is_maybe_live_out)
),
listed AS (
  SELECT module_id, color, peak_time, value_id
  FROM held
  UNION
  SELECT module_id, color, peak_time, value_id
  FROM throughout
  WHERE size_rank = 1
)
SELECT
  l.module_id,
  l.color,
  l.peak_time,
  l.value_id,
  a.allocation_index,
  al.category,
  a.size,
  v.logical_bytes,
  true AS live_at_peak
FROM listed AS l
JOIN assignments AS a
  ON a.module_id = l.module_id AND a.value_id = l.value_id
JOIN allocations AS al
  ON al.module_id = a.module_id
  AND al.allocation_index = a.allocation_index
JOIN hlo_values AS v
  ON v.module_id = l.module_id AND v.value_id = l.value_id
