-- name: oom-vs-peak
-- description: An OOM message's listed buffers beside the peak values of the module it names, where that module's dump is in the warehouse too: each listed buffer paired with at most one value and each value with at most one buffer.
-- param event VARCHAR = NULL: Event id or 12-digit event_hash prefix; NULL for every event whose module is loaded.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix to compare with (several: the rows of each); NULL: the latest ingested module of the event's program name.
-- param space INTEGER >= 0 = 0: Memory space (color) of the dump's heap peak to match against.
-- column event_id: Event (oom_events.event_id).
-- column module_id: The module compared with (the `module` parameter's, else the latest ingested of the event's program name).
-- column module_name: Its name.
-- column module_hash: Its 12-digit content-hash prefix: what `module` takes to choose it.
-- column modules_of_name: How many modules of that name the warehouse holds.
-- column module_note: Says which of them this is when there are several (NULL when one).
-- column rank: Number of the buffer in the OOM list.
-- column oom_size_bytes: Size the OOM message printed (usually rounded).
-- column oom_shape: Shape the OOM message printed.
-- column oom_op_name: op_name the OOM message printed.
-- column oom_source_line: source_line the OOM message printed.
-- column matched_by: What the peak value beside it shares with it: source+shape+size, op_name+shape+size, shape+size, shape or op_name; NULL if none is left to pair.
-- column value_id: The value paired with it, at one of the dump's peaks.
-- column instruction: Its defining instruction.
-- column peak_size: Its assigned bytes in the dump (exact).
-- column peak_shape: Its shape with layout.
-- column peak_op_name: op_name of its defining instruction.
-- column peak_source_line: source_line of its defining instruction.
-- column category: Its allocation kind (parameter, output, temp, ...).
-- column in_heap_peak: The value is among the dump's heap-peak buffers (heap_peak_buffers).
-- column in_logical_peak: The value is in HloLiveRange's printed peak list (peak_values).
-- note: Pairs are one to one, made in tiers, each from what the earlier ones left: (1) source+shape+size: the source line the message printed (and its file's name, where both have one), shape and size; (2) op_name+shape+size; (3) shape+size, an entry parameter to a parameter and any other buffer to a value that is none; (4) shape+size of any kind; (5) shape alone; (6) op_name alone. Shape is element type and dimensions; a size agrees when equal, or within 5% where the message printed it rounded (KiB with one decimal is the coarsest). Within a tier, the buffers that could take the same values (the same source line, op_name, kind, shape and size) take them in rank order, the values those at both peaks first, then those of HloLiveRange's printed peak list, then in value_id order; a buffer that two such groups would give a value keeps the value of closest size.
-- note: Without `module`, an event is compared with the latest ingested module of its program name; when the warehouse holds several of that name (configurations of one program, runs), module_note says so and module_hash names the one chosen: pass another's as `module`.
-- example: bufferhouse query oom-vs-peak --param event=1a2b3c4d5e6f --param module=6c00f6d51550
WITH events AS (
  SELECT event_id, program_name
  FROM oom_events
  WHERE
    (program_name IS NOT NULL OR ($module IS NOT NULL AND $event IS NOT NULL))
    AND (
      $event IS NULL
      OR CAST(event_id AS VARCHAR) = $event
      OR (length($event) = 12 AND substr(event_hash, 1, 12) = $event)
    )
),
wanted AS (
  SELECT module_id, module_name
  FROM modules
  WHERE bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
named AS (
  SELECT module_name, count(*) AS modules_of_name, max(module_id) AS latest
  FROM modules
  GROUP BY module_name
),
matched_module AS (
  -- the latest of the program's name, or each module `module` selects: of the
  -- event's program name, or any when one event is asked for by id
  SELECT e.event_id, n.latest AS module_id
  FROM events AS e
  JOIN named AS n
    ON n.module_name = e.program_name
  WHERE $module IS NULL
  UNION ALL
  SELECT e.event_id, w.module_id
  FROM events AS e
  JOIN wanted AS w
    ON $event IS NOT NULL OR w.module_name = e.program_name
  WHERE $module IS NOT NULL
),
oom AS (
  SELECT
    b.event_id, mm.module_id, b.rank, b.size_bytes, b.size_exact, b.shape,
    b.element_type, b.dims, b.op_name, b.source_file, b.source_line,
    b.is_entry_parameter,
    -- a buffer's own number: ranks repeat where a message gives none (rank 0)
    row_number() OVER (
      PARTITION BY b.event_id, mm.module_id ORDER BY b.rank, b.line
    ) AS nth_buffer
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
    min(i.op_name) AS op_name, min(i.source_file) AS source_file,
    min(i.source_line) AS source_line
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
  -- each buffer and value sharing a shape or an op_name, and what they share
  SELECT
    o.event_id, o.module_id, o.nth_buffer, p.value_id, p.size,
    abs(p.size - o.size_bytes) AS size_gap,
    p.source_line, p.op_name, p.element_type, p.dims,
    p.category = 'parameter' AS is_parameter,
    -- values at both peaks first, then those HloLiveRange printed, then by id
    CASE
      WHEN p.in_heap_peak AND p.in_logical_peak THEN 0
      WHEN p.in_logical_peak THEN 1
      ELSE 2
    END AS peak_order,
    regexp_replace(p.source_file, '.*/', '') AS file_name,
    o.source_line IS NOT NULL AND o.source_line = p.source_line
    AND (
      o.source_file IS NULL OR p.source_file IS NULL
      OR regexp_replace(o.source_file, '.*/', '')
      = regexp_replace(p.source_file, '.*/', '')
    ) AS same_source,
    o.op_name IS NOT NULL AND o.op_name = p.op_name AS same_op,
    o.element_type = p.element_type AND o.dims = p.dims AS same_shape,
    o.size_bytes = p.size OR (
      NOT o.size_exact AND abs(p.size - o.size_bytes) <= 0.05 * o.size_bytes
    ) AS same_size,
    o.is_entry_parameter = (p.category = 'parameter') AS same_kind
  FROM oom AS o
  JOIN facts AS p
    ON
      p.module_id = o.module_id
      AND (
        (o.element_type = p.element_type AND o.dims = p.dims)
        OR o.op_name = p.op_name
      )
),
tier1 AS (
  SELECT *, 1 AS tier, 'source+shape+size' AS matched_by
  FROM (
    SELECT
      *,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, file_name, source_line,
          element_type, dims, size
        ORDER BY nth_buffer
      ) AS buffer_n,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, file_name, source_line,
          element_type, dims, size
        ORDER BY peak_order, value_id
      ) AS value_n
    FROM pairs
    WHERE same_source AND same_shape AND same_size
  ) AS c
  WHERE buffer_n = value_n
),
done1 AS (
  SELECT event_id, module_id, nth_buffer, value_id, size_gap, tier, matched_by
  FROM (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY event_id, module_id, nth_buffer
        ORDER BY size_gap, value_id
      ) AS nth
    FROM tier1
  ) AS t
  WHERE nth = 1
),
tier2 AS (
  SELECT *, 2 AS tier, 'op_name+shape+size' AS matched_by
  FROM (
    SELECT
      *,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, op_name, element_type, dims, size
        ORDER BY nth_buffer
      ) AS buffer_n,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, op_name, element_type, dims, size
        ORDER BY peak_order, value_id
      ) AS value_n
    FROM pairs AS p
    WHERE
      same_op AND same_shape AND same_size
      AND NOT EXISTS (
        SELECT 1 FROM done1 AS d
        WHERE
          d.event_id = p.event_id AND d.module_id = p.module_id
          AND (d.nth_buffer = p.nth_buffer OR d.value_id = p.value_id)
      )
  ) AS c
  WHERE buffer_n = value_n
),
done2 AS (
  SELECT event_id, module_id, nth_buffer, value_id, size_gap, tier, matched_by
  FROM (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY event_id, module_id, nth_buffer
        ORDER BY size_gap, value_id
      ) AS nth
    FROM tier2
  ) AS t
  WHERE nth = 1
  UNION ALL
  SELECT * FROM done1
),
tier3 AS (
  SELECT *, 3 AS tier, 'shape+size' AS matched_by
  FROM (
    SELECT
      *,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, is_parameter, element_type, dims,
          size
        ORDER BY nth_buffer
      ) AS buffer_n,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, is_parameter, element_type, dims,
          size
        ORDER BY peak_order, value_id
      ) AS value_n
    FROM pairs AS p
    WHERE
      same_kind AND same_shape AND same_size
      AND NOT EXISTS (
        SELECT 1 FROM done2 AS d
        WHERE
          d.event_id = p.event_id AND d.module_id = p.module_id
          AND (d.nth_buffer = p.nth_buffer OR d.value_id = p.value_id)
      )
  ) AS c
  WHERE buffer_n = value_n
),
done3 AS (
  SELECT event_id, module_id, nth_buffer, value_id, size_gap, tier, matched_by
  FROM (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY event_id, module_id, nth_buffer
        ORDER BY size_gap, value_id
      ) AS nth
    FROM tier3
  ) AS t
  WHERE nth = 1
  UNION ALL
  SELECT * FROM done2
),
tier4 AS (
  SELECT *, 4 AS tier, 'shape+size' AS matched_by
  FROM (
    SELECT
      *,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, element_type, dims, size
        ORDER BY nth_buffer
      ) AS buffer_n,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, element_type, dims, size
        ORDER BY peak_order, value_id
      ) AS value_n
    FROM pairs AS p
    WHERE
      same_shape AND same_size
      AND NOT EXISTS (
        SELECT 1 FROM done3 AS d
        WHERE
          d.event_id = p.event_id AND d.module_id = p.module_id
          AND (d.nth_buffer = p.nth_buffer OR d.value_id = p.value_id)
      )
  ) AS c
  WHERE buffer_n = value_n
),
done4 AS (
  SELECT event_id, module_id, nth_buffer, value_id, size_gap, tier, matched_by
  FROM (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY event_id, module_id, nth_buffer
        ORDER BY size_gap, value_id
      ) AS nth
    FROM tier4
  ) AS t
  WHERE nth = 1
  UNION ALL
  SELECT * FROM done3
),
tier5 AS (
  SELECT *, 5 AS tier, 'shape' AS matched_by
  FROM (
    SELECT
      *,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, element_type, dims
        ORDER BY nth_buffer
      ) AS buffer_n,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, element_type, dims
        ORDER BY peak_order, value_id
      ) AS value_n
    FROM pairs AS p
    WHERE
      same_shape
      AND NOT EXISTS (
        SELECT 1 FROM done4 AS d
        WHERE
          d.event_id = p.event_id AND d.module_id = p.module_id
          AND (d.nth_buffer = p.nth_buffer OR d.value_id = p.value_id)
      )
  ) AS c
  WHERE buffer_n = value_n
),
done5 AS (
  SELECT event_id, module_id, nth_buffer, value_id, size_gap, tier, matched_by
  FROM (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY event_id, module_id, nth_buffer
        ORDER BY size_gap, value_id
      ) AS nth
    FROM tier5
  ) AS t
  WHERE nth = 1
  UNION ALL
  SELECT * FROM done4
),
tier6 AS (
  SELECT *, 6 AS tier, 'op_name' AS matched_by
  FROM (
    SELECT
      *,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, op_name ORDER BY nth_buffer
      ) AS buffer_n,
      dense_rank() OVER (
        PARTITION BY event_id, module_id, op_name ORDER BY peak_order, value_id
      ) AS value_n
    FROM pairs AS p
    WHERE
      same_op
      AND NOT EXISTS (
        SELECT 1 FROM done5 AS d
        WHERE
          d.event_id = p.event_id AND d.module_id = p.module_id
          AND (d.nth_buffer = p.nth_buffer OR d.value_id = p.value_id)
      )
  ) AS c
  WHERE buffer_n = value_n
),
done AS (
  SELECT event_id, module_id, nth_buffer, value_id, size_gap, tier, matched_by
  FROM (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY event_id, module_id, nth_buffer
        ORDER BY size_gap, value_id
      ) AS nth
    FROM tier6
  ) AS t
  WHERE nth = 1
  UNION ALL
  SELECT * FROM done5
)
SELECT
  o.event_id,
  o.module_id,
  m.module_name,
  substr(m.content_hash, 1, 12) AS module_hash,
  n.modules_of_name,
  CASE
    WHEN n.modules_of_name IS NULL OR n.modules_of_name < 2 THEN NULL
    WHEN $module IS NULL
      THEN 'the latest ingested of ' || CAST(n.modules_of_name AS VARCHAR)
        || ' modules named ' || m.module_name
        || '; choose another with the module parameter'
    ELSE 'chosen by the module parameter, of '
      || CAST(n.modules_of_name AS VARCHAR) || ' modules named '
      || m.module_name
  END AS module_note,
  o.rank,
  o.size_bytes AS oom_size_bytes,
  o.shape AS oom_shape,
  o.op_name AS oom_op_name,
  o.source_line AS oom_source_line,
  d.matched_by,
  d.value_id,
  p.instruction,
  p.size AS peak_size,
  p.shape AS peak_shape,
  p.op_name AS peak_op_name,
  p.source_line AS peak_source_line,
  p.category,
  p.in_heap_peak,
  p.in_logical_peak
FROM oom AS o
JOIN modules AS m
  ON m.module_id = o.module_id
LEFT JOIN named AS n
  ON n.module_name = m.module_name
LEFT JOIN done AS d
  ON
    d.event_id = o.event_id AND d.module_id = o.module_id
    AND d.nth_buffer = o.nth_buffer
LEFT JOIN facts AS p
  ON p.module_id = d.module_id AND p.value_id = d.value_id
ORDER BY o.event_id, o.module_id, o.rank
