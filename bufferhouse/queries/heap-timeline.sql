-- name: heap-timeline
-- description: Live bytes of one module and memory space at every program-order step, split into indefinite and temp; its maximum is heap_peak_bytes.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix (required).
-- param space INTEGER >= 0 = 0: Memory space (color).
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column color: Memory space.
-- column time: Program-order step, 0 .. schedule_length.
-- column instruction: Instruction scheduled at that step (NULL at the end step).
-- column indefinite_bytes: Parameter, output, constant and thread-local allocations of the space (constant over time).
-- column temp_bytes: Bytes of temp allocations in use: the union of the byte ranges of temp values (not tuple-shaped) live at the step.
-- column live_bytes: indefinite_bytes + temp_bytes.
-- column is_peak: The step is the module's heap peak (first maximum).
-- note: Live ranges are inclusive at both ends. Aliased values share a byte range and count once; a temp value without a live range counts as live throughout; tuple-shaped temp values (pointer tables XLA never heap-simulates) do not count. Steps run to schedule_length, where read-only entry parameters end. Source: the live ranges of a text dump; a module read from a proto alone (no live ranges) has no rows here: the heap-trace query draws it from the heap-simulator trace.
-- example: bufferhouse query heap-timeline --param module=jit_train_step --format csv
WITH chosen AS (
  -- the module selector (see queries/__init__.py) and the module's heap peak
  SELECT m.module_id, m.module_name, m.schedule_length, h.color,
    h.indefinite_bytes, h.peak_time
  FROM modules AS m
  JOIN heap_peaks AS h
    ON h.module_id = m.module_id
  WHERE
    h.color = $space
    AND m.schedule_length IS NOT NULL
    -- a module read from a proto alone has no live ranges: heap-trace draws it
    AND (
      NOT list_contains(m.sections, 'proto')
      OR list_contains(m.sections, 'live_range')
    )
    -- the name compared once more, outside the macro: the error for a missing
    -- module needs a comparison DuckDB cannot fold away
    AND (
      m.module_name = coalesce($module, error('heap-timeline needs a module'))
      OR bh_is_module(
        $module, m.module_name, m.file_stem, m.module_id, m.content_hash
      )
    )
),
-- large tables are read through semi-joins on chosen: see queries/__init__.py
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
-- every step to every value
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
  coalesce(s.time = c.peak_time, false) AS is_peak
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
  NULL
WHERE NOT EXISTS (
  SELECT 1
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
ORDER BY module_id, time
