-- name: heap-timeline
-- description: Live bytes of one module and memory space over time, split into indefinite and temp: from the heap-simulator trace when the module has one in the space (what XProf's memory viewer draws), else from the live ranges at every program-order step; either way its maximum is heap_peaks.heap_peak_bytes.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix (required).
-- param space INTEGER >= 0 = 0: Memory space (color).
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column color: Memory space.
-- column time: live_ranges: program-order step, 0 .. schedule_length; trace: the event's position in the trace (heap_trace_steps.step), from 0.
-- column instruction: Instruction scheduled at that step (NULL at the end step); trace: the instruction the simulator was processing.
-- column indefinite_bytes: Bytes held throughout (constant over time). live_ranges: the parameter, output, constant and thread-local allocations of the space; trace: the same (heap_peaks.indefinite_bytes).
-- column temp_bytes: Bytes of temp allocations in use. live_ranges: the union of the byte ranges of temp values (not tuple-shaped) live at the step; trace: the trace's bytes in use after the event (heap_events.heap_bytes).
-- column live_bytes: indefinite_bytes + temp_bytes.
-- column is_peak: The step is the module's heap peak (first maximum; heap_peaks.peak_time for live_ranges).
-- column source: Where the rows come from: 'trace' (heap_events) or 'live_ranges'.
-- note: Live ranges are inclusive at both ends. Aliased values share a byte range and count once; a temp value without a live range counts as live throughout; tuple-shaped temp values (pointer tables XLA never heap-simulates) do not count. Steps run to schedule_length, where read-only entry parameters end.
-- note: The trace wins: a module with heap_events in the space (a proto or profile, alone or beside its text dump) is drawn from them, one row per event (the rows of the heap_trace_steps view, as heap-trace reads them); only modules without one sweep live ranges. A module read from a proto alone with no trace in the space has no rows.
-- example: bufferhouse query heap-timeline --param module=jit_train_step --format csv
WITH selected AS (
  -- the module selector (see docs/query-planning.md)
  SELECT m.module_id, m.module_name, m.schedule_length, m.sections
  FROM modules AS m
  WHERE
    -- the name compared once more, outside the macro: the error for a missing
    -- module needs a comparison DuckDB cannot fold away
    m.module_name = coalesce($module, error('heap-timeline needs a module'))
    OR bh_is_module(
      $module, m.module_name, m.file_stem, m.module_id, m.content_hash
    )
),
-- the trace wins: a module with one in the space is drawn from it
traced AS (
  SELECT DISTINCT module_id
  FROM heap_events
  WHERE
    color = $space
    AND module_id IN (SELECT module_id FROM selected)
),
chosen AS (
  -- the modules drawn from their live ranges, and their heap peak
  SELECT s.module_id, s.module_name, s.schedule_length, h.color,
    h.indefinite_bytes, h.peak_time
  FROM selected AS s
  JOIN heap_peaks AS h
    ON h.module_id = s.module_id
  WHERE
    h.color = $space
    AND s.schedule_length IS NOT NULL
    AND s.module_id NOT IN (SELECT module_id FROM traced)
    -- a module read from a proto alone has no live ranges
    AND (
      NOT list_contains(s.sections, 'proto')
      OR list_contains(s.sections, 'live_range')
    )
),
-- large tables are read through semi-joins on chosen and traced: see
-- docs/query-planning.md. The trace's rows are the heap_trace_steps view's
-- (the same numbering, the peak by bh_peak_first), computed here on the
-- module's events only: the view's windows would read every module's
trace_events AS (
  SELECT
    e.module_id,
    e.color,
    e.instruction,
    e.heap_bytes,
    row_number() OVER (
      PARTITION BY e.module_id
      ORDER BY e.trace_index, e.event_index
    ) - 1 AS step
  FROM heap_events AS e
  WHERE
    e.color = $space
    AND e.module_id IN (SELECT module_id FROM traced)
),
trace_steps AS (
  SELECT
    t.*,
    bh_peak_first(t.step, t.heap_bytes) OVER (
      PARTITION BY t.module_id
    ) AS peak_step
  FROM trace_events AS t
),
steps AS (
  SELECT c.module_id, s.range AS time
  FROM chosen AS c, range(0, c.schedule_length + 1) AS s(range)
),
temp_values AS (
  SELECT
    a.module_id,
    a.allocation_index,
    a.value_id,
    a.byte_offset AS lo,
    a.byte_offset + a.size AS hi,
    greatest(coalesce(lr.start_time, 0), 0) AS start_time,
    least(coalesce(lr.end_time, c.schedule_length), c.schedule_length)
      AS end_time
  FROM assignments AS a
  JOIN chosen AS c
    ON c.module_id = a.module_id
  JOIN (
    SELECT module_id, allocation_index, color
    FROM allocations
    WHERE
      is_preallocated_temp
      AND module_id IN (SELECT module_id FROM chosen)
  ) AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
    AND al.color = c.color
  LEFT JOIN (
    SELECT module_id, value_id, start_time, end_time
    FROM live_ranges
    WHERE module_id IN (SELECT module_id FROM chosen)
  ) AS lr
    ON lr.module_id = a.module_id AND lr.value_id = a.value_id
  -- tuple-shaped values are pointer tables XLA never heap-simulates (own
  -- allocation, merged into the temp one afterwards): not part of the heap
  JOIN (
    SELECT module_id, value_id
    FROM hlo_values
    WHERE
      NOT coalesce(is_tuple, false)
      AND module_id IN (SELECT module_id FROM chosen)
  ) AS v
    ON v.module_id = a.module_id AND v.value_id = a.value_id
  WHERE a.size > 0
),
-- each value's live steps, generated from its range rather than by joining
-- every step to every value: bh_live_at(time, start_time, end_time), the
-- range clamped to the schedule
live AS (
  SELECT t.module_id, s.range AS time, t.allocation_index, t.value_id, t.lo,
    t.hi
  FROM temp_values AS t, range(t.start_time, t.end_time + 1) AS s(range)
),
-- the union of the live byte ranges of each allocation at each step: sorted
-- by lo, a range adds what reaches past the highest hi before it (`reach`),
-- as that part alone is not covered by the ranges before it
ordered AS (
  SELECT
    module_id,
    time,
    lo,
    hi,
    max(hi) OVER (
      PARTITION BY module_id, time, allocation_index
      ORDER BY lo, hi, value_id
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS reach
  FROM live
),
temp_by_time AS (
  SELECT
    module_id,
    time,
    CAST(sum(greatest(hi - greatest(lo, coalesce(reach, lo)), 0)) AS BIGINT)
      AS temp_bytes
  FROM ordered
  GROUP BY module_id, time
)
SELECT
  c.module_id,
  c.module_name,
  c.color,
  s.time,
  q.instruction,
  c.indefinite_bytes,
  coalesce(t.temp_bytes, 0) AS temp_bytes,
  c.indefinite_bytes + coalesce(t.temp_bytes, 0) AS live_bytes,
  coalesce(s.time = c.peak_time, false) AS is_peak,
  'live_ranges' AS source
FROM steps AS s
JOIN chosen AS c
  ON c.module_id = s.module_id
LEFT JOIN temp_by_time AS t
  ON t.module_id = s.module_id AND t.time = s.time
LEFT JOIN (
  SELECT module_id, time, instruction
  FROM sequence
  WHERE module_id IN (SELECT module_id FROM chosen)
) AS q
  ON q.module_id = s.module_id AND q.time = s.time
UNION ALL
-- the trace, one row per event, as heap-trace reads it
SELECT
  t.module_id,
  s.module_name,
  t.color,
  t.step,
  t.instruction,
  p.indefinite_bytes,
  t.heap_bytes,
  p.indefinite_bytes + t.heap_bytes,
  t.step = t.peak_step,
  'trace'
FROM trace_steps AS t
JOIN selected AS s
  ON s.module_id = t.module_id
JOIN heap_peaks AS p
  ON p.module_id = t.module_id AND p.color = t.color
UNION ALL
-- a key that selects no module is an error (a typo), not an empty result: the
-- tool checks before it runs a query; this says it in the duckdb shell too
SELECT
  error(
    'heap-timeline: no module matches ''' || $module
    || ''' (a module name, file stem, module_id or 12-digit hash prefix)'
  ),
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL
WHERE NOT EXISTS (
  SELECT 1
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
ORDER BY module_id, time
