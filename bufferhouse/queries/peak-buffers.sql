-- name: peak-buffers
-- description: The buffers that make up the heap peak of a module (or the largest across the fleet), with the op and source line that made each.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for the whole fleet.
-- param space INTEGER >= 0 = 0: Memory space (color).
-- param top INTEGER >= 0 = 50: How many buffers, largest first.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column peak_time: heap-timeline's time of the peak: a program-order step (live_ranges) or the peak event's position in the trace (trace).
-- column value_id: Value id.
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column allocation_index: Allocation holding the value.
-- column category: parameter, output, thread-local, constant or temp.
-- column size: Assigned bytes (padded).
-- column logical_bytes: Unpadded bytes of the shape.
-- column padding_bytes: size - logical_bytes.
-- column shape: Value shape with layout.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name (name scope path).
-- column source: source_file:source_line of the op, NULL if unknown.
-- column live_at_peak: The value is held at the peak (false: shown for its indefinite allocation; always true from a trace).
-- column peak_source: Which peak: 'trace' (the heap-simulator trace's, the trace_peak_values view) or 'live_ranges' (heap_peak_buffers).
-- note: The trace wins, as in heap-timeline: a module with heap_events in the space lists the values held at the trace's peak (the trace_peak_values view's rows); the others, the values of heap_peak_values (live ranges). `source` is the op's source line, `peak_source` the peak's.
-- example: bufferhouse query peak-buffers --param module=jit_train_step
WITH wanted AS (
  -- the module selector: see queries/__init__.py
  SELECT module_id
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
-- the trace wins: a module with one in the space lists its trace's peak
traced AS (
  SELECT DISTINCT module_id
  FROM heap_events
  WHERE color = $space AND $module IS NULL
  UNION
  SELECT DISTINCT module_id
  FROM heap_events
  WHERE color = $space AND module_id IN (SELECT module_id FROM wanted)
),
-- the trace_peak_values view's rows, computed on the traced modules' events
-- only (see queries/__init__.py): the first event at the space's highest
-- heap_bytes, in trace order
trace_events AS (
  SELECT
    e.module_id,
    e.trace_index,
    e.event_index,
    e.kind,
    e.value_id,
    e.heap_bytes,
    row_number() OVER (
      PARTITION BY e.module_id
      ORDER BY e.trace_index, e.event_index
    ) - 1 AS step,
    max(e.heap_bytes) OVER (PARTITION BY e.module_id) AS space_peak
  FROM heap_events AS e
  WHERE
    e.color = $space
    AND e.module_id IN (SELECT module_id FROM traced)
),
trace_peaks AS (
  SELECT e.module_id, e.trace_index, e.event_index, e.step
  FROM trace_events AS e
  JOIN (
    SELECT module_id, min(step) AS step
    FROM trace_events
    WHERE heap_bytes = space_peak
    GROUP BY module_id
  ) AS f
    ON f.module_id = e.module_id AND f.step = e.step
),
trace_listed AS (
  -- held at the peak: allocated (or shared) more often than freed up to and
  -- including the peak event
  SELECT e.module_id, p.step AS peak_time, e.value_id
  FROM trace_events AS e
  JOIN trace_peaks AS p
    ON p.module_id = e.module_id AND p.trace_index = e.trace_index
  WHERE e.event_index <= p.event_index
  GROUP BY e.module_id, p.step, e.value_id
  HAVING sum(CASE WHEN e.kind = 'FREE' THEN -1 ELSE 1 END) > 0
  UNION
  -- held throughout: the largest value of each parameter, constant and output
  -- allocation of the space (lowest value_id on a tie; not thread-local)
  SELECT module_id, peak_time, value_id
  FROM (
    SELECT
      a.module_id,
      p.step AS peak_time,
      a.value_id,
      row_number() OVER (
        PARTITION BY a.module_id, a.allocation_index
        ORDER BY a.size DESC, a.value_id
      ) AS size_rank
    FROM assignments AS a
    JOIN (
      SELECT module_id, allocation_index
      FROM allocations
      WHERE
        color = $space
        AND NOT is_thread_local
        AND (is_parameter OR is_constant OR is_maybe_live_out)
        AND module_id IN (SELECT module_id FROM traced)
    ) AS al
      ON al.module_id = a.module_id
      AND al.allocation_index = a.allocation_index
    JOIN trace_peaks AS p
      ON p.module_id = a.module_id
    WHERE a.module_id IN (SELECT module_id FROM traced)
  )
  WHERE size_rank = 1
),
trace_rows AS (
  SELECT
    l.module_id, l.peak_time, l.value_id, a.allocation_index, al.category,
    a.size, v.logical_bytes, true AS live_at_peak
  FROM trace_listed AS l
  JOIN (
    SELECT module_id, value_id, allocation_index, size
    FROM assignments
    WHERE module_id IN (SELECT module_id FROM traced)
  ) AS a
    ON a.module_id = l.module_id AND a.value_id = l.value_id
  JOIN (
    SELECT module_id, allocation_index, category
    FROM allocations
    WHERE module_id IN (SELECT module_id FROM traced)
  ) AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
  JOIN (
    SELECT module_id, value_id, logical_bytes
    FROM hlo_values
    WHERE module_id IN (SELECT module_id FROM traced)
  ) AS v
    ON v.module_id = l.module_id AND v.value_id = l.value_id
),
-- each large table is read scoped to the module: see queries/__init__.py;
-- heap_peak_buffers holds the heap_peak_values rows, computed at ingest
candidates AS (
  SELECT
    module_id, peak_time, value_id, allocation_index, category, size,
    logical_bytes, live_at_peak, 'live_ranges' AS peak_source
  FROM heap_peak_buffers
  WHERE
    color = $space
    AND $module IS NULL
    AND module_id NOT IN (SELECT module_id FROM traced)
  UNION ALL
  SELECT
    module_id, peak_time, value_id, allocation_index, category, size,
    logical_bytes, live_at_peak, 'live_ranges' AS peak_source
  FROM heap_peak_buffers
  WHERE
    color = $space
    AND module_id IN (SELECT module_id FROM wanted)
    AND module_id NOT IN (SELECT module_id FROM traced)
  UNION ALL
  SELECT
    module_id, peak_time, value_id, allocation_index, category, size,
    logical_bytes, live_at_peak, 'trace' AS peak_source
  FROM trace_rows
),
cutoff AS (
  -- candidates is read once (a CTE read twice is materialized): the cutoff
  -- reads the tables again
  SELECT min(size) AS size
  FROM (
    SELECT size FROM heap_peak_buffers
    WHERE
      color = $space
      AND $module IS NULL
      AND module_id NOT IN (SELECT module_id FROM traced)
    UNION ALL
    SELECT size FROM heap_peak_buffers
    WHERE
      color = $space
      AND module_id IN (SELECT module_id FROM wanted)
      AND module_id NOT IN (SELECT module_id FROM traced)
    UNION ALL
    SELECT size FROM trace_rows
    ORDER BY size DESC
    LIMIT $top
  )
),
top_listed AS (
  SELECT b.*, m.module_name
  FROM candidates AS b
  JOIN modules AS m
    ON m.module_id = b.module_id
  WHERE b.size >= (SELECT size FROM cutoff)
  ORDER BY b.size DESC, m.module_name, b.module_id, b.value_id
  LIMIT $top
),
top_modules AS (
  SELECT DISTINCT module_id FROM top_listed
)
SELECT
  t.module_id,
  t.module_name,
  t.peak_time,
  t.value_id,
  v.instruction,
  v.shape_index,
  t.allocation_index,
  t.category,
  t.size,
  t.logical_bytes,
  t.size - t.logical_bytes AS padding_bytes,
  v.shape,
  i.opcode,
  i.op_name,
  i.source_file || ':' || CAST(i.source_line AS VARCHAR) AS source,
  t.live_at_peak,
  t.peak_source
FROM top_listed AS t
JOIN hlo_values AS v
  ON v.module_id = t.module_id AND v.value_id = t.value_id
LEFT JOIN (
  SELECT
    module_id, instruction, opcode, op_name, source_file, source_line
  FROM instructions
  WHERE module_id IN (SELECT module_id FROM top_modules)
) AS i
  ON i.module_id = t.module_id AND i.instruction = v.instruction
WHERE v.module_id IN (SELECT module_id FROM top_modules)
ORDER BY t.size DESC, t.module_name, t.module_id, t.value_id
