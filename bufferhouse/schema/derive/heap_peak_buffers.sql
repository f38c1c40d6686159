-- name: heap_peak_buffers
-- description: The buffers at each color's heap peak, the same rows from every form of a compile: each temp value held at the peak (per the heap-simulator trace where the color's peak came from one, else per the live ranges), and one row per indefinite allocation (parameter, output, constant, thread-local), its largest value (the allocation counts whole, for the whole run).
-- param lo BIGINT = NULL: lowest module_id whose rows are derived
-- param hi BIGINT = NULL: highest module_id whose rows are derived
-- note: The one definition of the heap-peak membership rule, for every form a module came in: the heap_peak_values view and the peak-buffers query read these rows.
-- note: Indefinite allocations are not asked which value is live at the peak (a proto carries no live ranges, and the allocation is held whole either way): so a text dump, its proto and a profile of one compile list the same rows, whose sizes sum to heap_peaks.heap_peak_bytes where temp values held at once do not share bytes.
-- note: From a trace (heap_peaks.peak_source = 'trace'), a temp value is held at the peak when it was allocated (or shared) more often than freed up to and including the first event at the color's highest heap_bytes, the event whose step heap_peaks.peak_time is.
-- note: Reads only the base rows of the modules with ids in [$lo, $hi]; the caller inserts the result into the table of this name.
WITH placed AS MATERIALIZED (
  -- each placed value of a color with a heap_peaks row. The steps are
  -- materialized one join at a time: every table shares module_id, and left
  -- to reorder, the planner has joined whole modules' tables on module_id
  -- alone (hundreds of GB of intermediate rows on the bench warehouse)
  SELECT
    a.module_id, al.color, p.peak_time, p.peak_source, a.value_id,
    a.allocation_index, al.category, a.size
  FROM assignments AS a
  JOIN (
    SELECT module_id, allocation_index, color, category
    FROM allocations
    WHERE module_id BETWEEN $lo AND $hi
  ) AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
  JOIN (
    SELECT module_id, color, peak_time, peak_source
    FROM heap_peaks
    WHERE module_id BETWEEN $lo AND $hi
  ) AS p
    ON p.module_id = al.module_id AND p.color = al.color
  WHERE a.module_id BETWEEN $lo AND $hi
),
peak_events AS MATERIALIZED (
  -- the first event (trace order) at each color's highest heap_bytes
  SELECT module_id, color, peak.trace_index, peak.event_index
  FROM (
    SELECT
      module_id, color,
      bh_peak_first(
        {'trace_index': trace_index, 'event_index': event_index}, heap_bytes
      ) AS peak
    FROM heap_events
    WHERE module_id BETWEEN $lo AND $hi
    GROUP BY module_id, color
  )
),
held AS MATERIALIZED (
  -- held at the trace's peak: allocated (or shared) more often than freed up
  -- to and including the peak event
  SELECT e.module_id, e.color, e.value_id
  FROM heap_events AS e
  JOIN peak_events AS p
    ON p.module_id = e.module_id
    AND p.color = e.color
    AND p.trace_index = e.trace_index
  WHERE e.module_id BETWEEN $lo AND $hi AND e.event_index <= p.event_index
  GROUP BY e.module_id, e.color, e.value_id
  HAVING sum(CASE WHEN e.kind = 'FREE' THEN -1 ELSE 1 END) > 0
),
facts AS MATERIALIZED (
  -- a temp value held at the peak: from the trace, one it holds then; else
  -- the value's range covers the peak step (a temp value without a range
  -- counts as live)
  SELECT
    f.*,
    CASE
      WHEN f.peak_source = 'trace' THEN h.value_id IS NOT NULL
      ELSE f.peak_time IS NOT NULL
        AND bh_live_at(f.peak_time, lr.start_time, lr.end_time)
    END AS live_at_peak
  FROM placed AS f
  LEFT JOIN (
    SELECT module_id, value_id, start_time, end_time
    FROM live_ranges
    WHERE module_id BETWEEN $lo AND $hi
  ) AS lr
    ON lr.module_id = f.module_id AND lr.value_id = f.value_id
  LEFT JOIN held AS h
    ON h.module_id = f.module_id
    AND h.color = f.color
    AND h.value_id = f.value_id
  WHERE f.category = 'temp'
),
indefinite AS (
  -- an indefinite allocation is held whole for the whole run, in every form:
  -- one row, its largest value (lowest value_id on a tie). Which of its values
  -- is live at the peak is not asked: a proto cannot say, and the bytes are
  -- the allocation's either way
  SELECT module_id, allocation_index, max(size) AS top_size
  FROM placed
  WHERE category <> 'temp'
  GROUP BY module_id, allocation_index
),
shown AS (
  SELECT f.module_id, f.allocation_index, min(f.value_id) AS value_id
  FROM placed AS f
  JOIN indefinite AS d
    ON d.module_id = f.module_id
    AND d.allocation_index = f.allocation_index
  WHERE f.category <> 'temp' AND f.size = d.top_size
  GROUP BY f.module_id, f.allocation_index
),
listed AS MATERIALIZED (
  SELECT * FROM facts WHERE live_at_peak
  UNION ALL
  SELECT f.*, false AS live_at_peak
  FROM placed AS f
  JOIN shown AS s
    ON s.module_id = f.module_id
    AND s.allocation_index = f.allocation_index
    AND s.value_id = f.value_id
)
SELECT
  l.module_id, l.color, l.peak_time, l.value_id, l.allocation_index,
  l.category, l.size, v.logical_bytes, l.live_at_peak
FROM listed AS l
JOIN hlo_values AS v
  ON v.module_id = l.module_id AND v.value_id = l.value_id
WHERE v.module_id BETWEEN $lo AND $hi
  -- a tuple in a temp allocation is a pointer table XLA never heap-simulates:
  -- the heap sweep leaves it out of the peak, so it is not one of its buffers
  AND NOT (l.category = 'temp' AND coalesce(v.is_tuple, false))
