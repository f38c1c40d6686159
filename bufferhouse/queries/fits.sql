-- name: fits
-- description: Will it fit: per program, label set and swept size, the compile's peak against its target's capacity (or its compile-time OOM), the headroom, and per label set the largest size that fits, the smallest that does not, and the limit a line fitted through the compiles predicts, with its held-out error.
-- param swept VARCHAR = 'batch': The label key that was swept (its values must be numbers).
-- param label VARCHAR = NULL: Only modules and OOM events with this `key=value` label; NULL for all.
-- param capacity VARCHAR = NULL: Capacity to judge by instead of the target's, e.g. 16GiB, 80GB or bytes, read by bh_size_bytes (K, Ki, KiB... are powers of 1024; KB, MB... of 1000; anything else is an error).
-- param min_headroom DOUBLE >= 0 = 0: Percent of the capacity that must stay free for a size to fit.
-- param top_sources INTEGER >= 1 = 3: How many source lines limit_sources names.
-- column program_name: Module name (modules.module_name), or the program an OOM names.
-- column labels: The other labels of the compile, `k=v` joined by commas (the size key left out): one sweep.
-- column size_value: The swept label's value.
-- column kind: compile (a module was ingested) or oom (the compile failed: an OOM event with these labels).
-- column peak_bytes: The module's peak (xla_peak_bytes, else heap_peak_bytes); for an OOM, what it says was required (used_bytes, else requested_bytes).
-- column capacity_bytes: The capacity given, else the target's (module_targets.capacity_bytes), else what the OOM says was available.
-- column capacity_source: param, dump, table or oom.
-- column headroom_bytes: capacity_bytes - peak_bytes.
-- column headroom_pct: headroom_bytes as a percent of capacity_bytes.
-- column fits: The size fits: a compile whose headroom is at least min_headroom percent; never an OOM.
-- column largest_fitting: Of the label set, the largest size that fits.
-- column smallest_failing: Of the label set, the smallest size that does not.
-- column bytes_per_unit: Slope of the line peak_bytes = a * size + b fitted through the label set's fitting compiles.
-- column predicted_limit: The largest size the line puts within capacity (less min_headroom), floored.
-- column heldout_error_pct: The line's worst error on a compile left out of the fit (each fitting compile in turn; needs 3), in percent of that compile's peak.
-- column dominant_category: At the largest fitting size, the allocation category (temp, parameter, output, ...) of memory space 0 holding the most bytes.
-- column limit_sources: At the largest fitting size, what holds the memory at the heap peak: the buffers live there per op and source line (heap_peak_sources, memory space 0), the top_sources largest, each `file:line op_name: bytes B (share% of peak_bytes)`, largest first, joined by `; `; `(unknown)` for ops without a source line.
-- note: The peak is one device's (an SPMD program's share). Generated code is not in the dump and not added. On TPU the compiler fails a program that does not fit (E1000: kind oom); XLA:GPU compiles anything, so on GPU fits is this comparison alone. A line through the compiles predicts the limit only where the program's memory grows linearly with the size: the held-out error says how well it did on the sweep (docs/fits.md).
-- example: bufferhouse query fits --param swept=batch --param min_headroom=10
WITH capacity_param AS (
  SELECT bh_size_bytes($capacity, 'capacity') AS bytes
),
-- modules and OOM events alike: a record of either kind with its labels
record_labels AS (
  SELECT 'compile' AS kind, module_id AS id, key, value FROM labels
  UNION ALL
  SELECT 'oom' AS kind, event_id AS id, key, value FROM oom_labels
),
swept_records AS (
  -- a record that carries the swept label: its size and its other labels
  SELECT
    kind,
    id,
    max(CASE WHEN key = $swept THEN value END) AS size_value,
    string_agg(
      CASE WHEN key <> $swept THEN key || '=' || value END, ','
      ORDER BY key, value
    ) AS labels,
    max(CASE WHEN key || '=' || value = $label THEN 1 ELSE 0 END) AS chosen
  FROM record_labels
  GROUP BY kind, id
  HAVING max(CASE WHEN key = $swept THEN 1 ELSE 0 END) = 1
),
records AS (
  SELECT
    'compile' AS kind,
    m.module_id AS id,
    m.module_name AS program,
    coalesce(m.xla_peak_bytes, m.heap_peak_bytes) AS peak_bytes,
    t.capacity_bytes AS own_capacity,
    t.capacity_source AS own_source
  FROM modules AS m
  LEFT JOIN module_targets AS t
    ON t.module_id = m.module_id
  UNION ALL
  SELECT
    'oom',
    e.event_id,
    e.program_name,
    coalesce(e.used_bytes, e.requested_bytes, e.total_usage_bytes),
    e.capacity_bytes,
    CASE WHEN e.capacity_bytes IS NOT NULL THEN 'oom' END
  FROM oom_events AS e
),
verdicts AS (
  SELECT
    r.kind,
    CASE WHEN r.kind = 'compile' THEN r.id END AS module_id,
    r.program,
    s.labels,
    s.size_value,
    TRY_CAST(s.size_value AS DOUBLE) AS size_number,
    r.peak_bytes,
    coalesce(p.bytes, r.own_capacity) AS capacity_bytes,
    CASE WHEN p.bytes IS NOT NULL THEN 'param' ELSE r.own_source END
      AS capacity_source,
    coalesce(p.bytes, r.own_capacity) - r.peak_bytes AS headroom_bytes,
    r.kind = 'compile'
    AND coalesce(p.bytes, r.own_capacity) IS NOT NULL
    AND r.peak_bytes IS NOT NULL
    AND (coalesce(p.bytes, r.own_capacity) - r.peak_bytes) * 100.0
      >= $min_headroom * coalesce(p.bytes, r.own_capacity) AS fits
  FROM records AS r
  JOIN swept_records AS s
    ON s.kind = r.kind AND s.id = r.id
  CROSS JOIN capacity_param AS p
  WHERE $label IS NULL OR s.chosen = 1
),
sweeps AS (
  -- each row with the figures of its sweep (program and label set)
  SELECT
    *,
    max(CASE WHEN fits THEN size_number END)
      OVER (PARTITION BY program, labels) AS largest_fitting,
    min(CASE WHEN NOT fits THEN size_number END)
      OVER (PARTITION BY program, labels) AS smallest_failing,
    regr_slope(
      CASE WHEN fits THEN peak_bytes END, CASE WHEN fits THEN size_number END
    ) OVER (PARTITION BY program, labels) AS slope,
    regr_intercept(
      CASE WHEN fits THEN peak_bytes END, CASE WHEN fits THEN size_number END
    ) OVER (PARTITION BY program, labels) AS intercept,
    max(CASE WHEN fits THEN capacity_bytes END)
      OVER (PARTITION BY program, labels) AS capacity,
    sum(CASE WHEN fits THEN 1 ELSE 0 END)
      OVER (PARTITION BY program, labels) AS n,
    sum(CASE WHEN fits THEN size_number END)
      OVER (PARTITION BY program, labels) AS sx,
    sum(CASE WHEN fits THEN CAST(peak_bytes AS DOUBLE) END)
      OVER (PARTITION BY program, labels) AS sy,
    sum(CASE WHEN fits THEN size_number * size_number END)
      OVER (PARTITION BY program, labels) AS sxx,
    sum(CASE WHEN fits THEN size_number * CAST(peak_bytes AS DOUBLE) END)
      OVER (PARTITION BY program, labels) AS sxy
  FROM verdicts
),
left_out AS (
  -- a fitting compile left out of the line: the sums without it give the line
  -- of the others (slope a, intercept b), which predicts its peak
  SELECT
    *,
    CASE WHEN fits AND n >= 3 THEN
      ((n - 1) * (sxy - size_number * peak_bytes)
        - (sx - size_number) * (sy - peak_bytes))
      / nullif(
        (n - 1) * (sxx - size_number * size_number)
        - (sx - size_number) * (sx - size_number),
        0
      )
    END AS a
  FROM sweeps
),
held_out AS (
  SELECT
    *,
    max(
      abs(
        a * size_number
        + ((sy - peak_bytes) - a * (sx - size_number)) / (n - 1)
        - peak_bytes
      )
      / peak_bytes
    ) OVER (PARTITION BY program, labels) * 100 AS heldout_error_pct
  FROM left_out
),
at_limit AS (
  -- the compile at the largest fitting size (of two at that size, the larger)
  SELECT program, labels, module_id, peak_bytes
  FROM (
    SELECT
      program, labels, module_id, peak_bytes,
      row_number() OVER (
        PARTITION BY program, labels ORDER BY peak_bytes DESC, module_id
      ) AS nth
    FROM sweeps
    WHERE fits AND size_number = largest_fitting
  ) AS t
  WHERE nth = 1
),
categories AS (
  SELECT
    l.program, l.labels, a.category,
    row_number() OVER (
      PARTITION BY l.program, l.labels ORDER BY sum(a.size) DESC, a.category
    ) AS nth
  FROM at_limit AS l
  JOIN allocations AS a
    ON a.module_id = l.module_id
  WHERE a.color = 0
  GROUP BY l.program, l.labels, a.category
),
-- heap_peak_sources: the buffers live at the heap peak, per op and source line
limit_lines AS (
  SELECT
    l.program, l.labels,
    coalesce(
      h.source_file || ':' || CAST(h.source_line AS VARCHAR), '(unknown)'
    ) || coalesce(' ' || h.op_name, '') || ': '
    || CAST(h.bytes AS VARCHAR) || ' B ('
    || CAST(round(100.0 * h.bytes / nullif(l.peak_bytes, 0), 1) AS VARCHAR)
    || '%)' AS line,
    h.bytes,
    row_number() OVER (
      PARTITION BY l.program, l.labels
      ORDER BY h.bytes DESC, h.source_file, h.source_line, h.op_name
    ) AS nth
  FROM at_limit AS l
  JOIN heap_peak_sources AS h
    ON h.module_id = l.module_id
  WHERE h.color = 0
),
limit_sources AS (
  SELECT
    program, labels,
    string_agg(line, '; ' ORDER BY nth) AS limit_sources
  FROM limit_lines
  WHERE nth <= $top_sources
  GROUP BY program, labels
)
SELECT
  v.program AS program_name,
  v.labels,
  v.size_value,
  v.kind,
  v.peak_bytes,
  v.capacity_bytes,
  v.capacity_source,
  v.headroom_bytes,
  round(100.0 * v.headroom_bytes / nullif(v.capacity_bytes, 0), 2)
    AS headroom_pct,
  v.fits,
  v.largest_fitting,
  v.smallest_failing,
  CASE WHEN v.n >= 2 THEN round(v.slope, 3) END AS bytes_per_unit,
  CASE WHEN v.n >= 2 THEN CAST(
    floor(
      (v.capacity * (1 - $min_headroom / 100.0) - v.intercept)
      / nullif(v.slope, 0)
    )
    AS BIGINT
  ) END AS predicted_limit,
  round(v.heldout_error_pct, 2) AS heldout_error_pct,
  c.category AS dominant_category,
  ls.limit_sources
FROM held_out AS v
LEFT JOIN categories AS c
  ON
    c.program IS NOT DISTINCT FROM v.program
    AND c.labels IS NOT DISTINCT FROM v.labels
    AND c.nth = 1
LEFT JOIN limit_sources AS ls
  ON
    ls.program IS NOT DISTINCT FROM v.program
    AND ls.labels IS NOT DISTINCT FROM v.labels
ORDER BY v.program, v.labels, v.size_number, v.kind
