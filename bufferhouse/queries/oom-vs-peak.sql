-- name: oom-vs-peak
-- description: An OOM message's listed buffers beside the peak buffers of the same module, where its dump is in the warehouse too: matched by module name, then each buffer by op_name and shape.
-- param event VARCHAR = NULL: Event id or 12-digit event_hash prefix; NULL for every event whose module is loaded.
-- param space INTEGER >= 0 = 0: Memory space (color) of the dump's heap peak to match against.
-- column event_id: Event (oom_events.event_id).
-- column module_id: The module whose name the event's program_name is (the latest ingested of that name).
-- column module_name: Its name.
-- column rank: Number of the buffer in the OOM list.
-- column oom_size_bytes: Size the OOM message printed (usually rounded).
-- column oom_shape: Shape the OOM message printed.
-- column oom_op_name: op_name the OOM message printed.
-- column matched_by: op_name+shape, shape or op_name: what the peak buffer beside it shares with it; NULL if no peak buffer matches.
-- column value_id: The matching value at one of the dump's peaks.
-- column instruction: Its defining instruction.
-- column peak_size: Its assigned bytes in the dump (exact).
-- column peak_shape: Its shape with layout.
-- column peak_op_name: op_name of its defining instruction.
-- column category: Its allocation kind (parameter, output, temp, ...).
-- column in_heap_peak: The value is among the dump's heap-peak buffers (heap_peak_buffers).
-- column in_logical_peak: The value is in HloLiveRange's printed peak list (peak_values).
-- note: Of several peak buffers that match one OOM buffer, the best match wins (op_name and shape over shape over op_name), then one of the same kind (an entry parameter beside a parameter), then the closest size.
-- example: bufferhouse query oom-vs-peak --param event=1a2b3c4d5e6f
WITH events AS (
  SELECT event_id, program_name
  FROM oom_events
  WHERE
    program_name IS NOT NULL
    AND (
      $event IS NULL
      OR CAST(event_id AS VARCHAR) = $event
      OR (length($event) = 12 AND substr(event_hash, 1, 12) = $event)
    )
),
matched_module AS (
  SELECT e.event_id, max(m.module_id) AS module_id
  FROM events AS e
  JOIN modules AS m
    ON m.module_name = e.program_name
  GROUP BY e.event_id
),
oom AS (
  SELECT
    b.event_id, mm.module_id, b.rank, b.size_bytes, b.shape,
    b.element_type, b.dims, b.op_name, b.is_entry_parameter
  FROM oom_buffers AS b
  JOIN matched_module AS mm
    ON mm.event_id = b.event_id
),
peak AS (
  -- the values at either peak of the dump: the heap peak (heap_peak_buffers)
  -- and HloLiveRange's printed peak (peak_values)
  SELECT
    module_id, value_id,
    bool_or(heap) AS in_heap_peak, bool_or(logical) AS in_logical_peak
  FROM (
    SELECT module_id, value_id, TRUE AS heap, FALSE AS logical
    FROM heap_peak_buffers
    WHERE module_id IN (SELECT module_id FROM matched_module)
    UNION ALL
    SELECT module_id, value_id, FALSE AS heap, TRUE AS logical
    FROM peak_values
    WHERE
      value_id IS NOT NULL
      AND module_id IN (SELECT module_id FROM matched_module)
  ) AS both_peaks
  GROUP BY module_id, value_id
),
facts AS (
  SELECT
    p.module_id, p.value_id, p.in_heap_peak, p.in_logical_peak,
    min(a.size) AS size, min(al.category) AS category,
    min(v.instruction) AS instruction, min(v.shape) AS shape,
    min(v.element_type) AS element_type, min(v.dims) AS dims,
    min(i.op_name) AS op_name
  FROM peak AS p
  JOIN hlo_values AS v
    ON v.module_id = p.module_id AND v.value_id = p.value_id
  JOIN assignments AS a
    ON a.module_id = p.module_id AND a.value_id = p.value_id
  JOIN allocations AS al
    ON al.module_id = a.module_id AND al.allocation_index = a.allocation_index
  LEFT JOIN instructions AS i
    ON i.module_id = p.module_id AND i.instruction = v.instruction
  WHERE
    al.color = $space
    AND v.module_id IN (SELECT module_id FROM matched_module)
  GROUP BY ALL
),
pairs AS (
  SELECT
    o.event_id, o.rank, o.size_bytes, p.value_id, p.instruction,
    p.size AS peak_size, p.shape AS peak_shape, p.op_name AS peak_op_name,
    p.category, p.in_heap_peak, p.in_logical_peak,
    o.is_entry_parameter = (p.category = 'parameter') AS same_kind,
    CASE
      WHEN o.op_name = p.op_name AND o.element_type = p.element_type
        AND o.dims = p.dims THEN 'op_name+shape'
      WHEN o.element_type = p.element_type AND o.dims = p.dims THEN 'shape'
      ELSE 'op_name'
    END AS matched_by
  FROM oom AS o
  JOIN facts AS p
    ON
      p.module_id = o.module_id
      AND (
        (o.element_type = p.element_type AND o.dims = p.dims)
        OR o.op_name = p.op_name
      )
),
ranked AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY event_id, rank
      ORDER BY
        CASE matched_by
          WHEN 'op_name+shape' THEN 0 WHEN 'shape' THEN 1 ELSE 2
        END,
        same_kind DESC, abs(peak_size - size_bytes), value_id
    ) AS nth
  FROM pairs
)
SELECT
  o.event_id,
  o.module_id,
  m.module_name,
  o.rank,
  o.size_bytes AS oom_size_bytes,
  o.shape AS oom_shape,
  o.op_name AS oom_op_name,
  r.matched_by,
  r.value_id,
  r.instruction,
  r.peak_size,
  r.peak_shape,
  r.peak_op_name,
  r.category,
  r.in_heap_peak,
  r.in_logical_peak
FROM oom AS o
JOIN modules AS m
  ON m.module_id = o.module_id
LEFT JOIN ranked AS r
  ON r.event_id = o.event_id AND r.rank = o.rank AND r.nth = 1
ORDER BY o.event_id, o.rank
