-- name: fits
-- description: Will it fit: per program, label set and swept size, the compile's peak against its target's capacity (or its compile-time OOM), the headroom, and per label set the largest size that fits, the smallest that does not, and the limit a line fitted through the compiles predicts, with its held-out error.
-- param swept VARCHAR = 'batch': The label key that was swept (its values must be numbers).
-- param label VARCHAR = NULL: Only modules and OOM events with this `key=value` label; NULL for all.
-- param capacity VARCHAR = NULL: Capacity to judge by instead of the target's, e.g. 16GiB, 80GB or bytes (K, M, G, T and KiB... are powers of 1024; KB, MB... of 1000).
-- param min_headroom DOUBLE >= 0 = 0: Percent of the capacity that must stay free for a size to fit.
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
-- note: The peak is one device's (an SPMD program's share). Generated code is not in the dump and not added. On TPU the compiler fails a program that does not fit (E1000: kind oom); XLA:GPU compiles anything, so on GPU fits is this comparison alone. A line through the compiles predicts the limit only where the program's memory grows linearly with the size: the held-out error says how well it did on the sweep (docs/fits.md).
-- example: bufferhouse query fits --param swept=batch --param min_headroom=10
WITH capacity_param AS (
  SELECT
    CASE
      WHEN $capacity IS NULL THEN NULL
      WHEN regexp_extract(
        trim($capacity), '^[0-9]+(\.[0-9]+)?\s*([KMGTkmgt]i?[Bb]?|[Bb])?', 0
      ) = trim($capacity)
        THEN CAST(
          CAST(regexp_extract(trim($capacity), '^[0-9.]+', 0) AS DOUBLE)
          * CASE upper(regexp_replace(trim($capacity), '^[0-9.]+\s*', ''))
            WHEN 'KB' THEN 1e3
            WHEN 'MB' THEN 1e6
            WHEN 'GB' THEN 1e9
            WHEN 'TB' THEN 1e12
            WHEN 'K' THEN 1024.0
            WHEN 'KIB' THEN 1024.0
            WHEN 'M' THEN 1048576.0
            WHEN 'MIB' THEN 1048576.0
            WHEN 'G' THEN 1073741824.0
            WHEN 'GIB' THEN 1073741824.0
            WHEN 'T' THEN 1099511627776.0
            WHEN 'TIB' THEN 1099511627776.0
            ELSE 1.0
          END AS BIGINT
        )
      ELSE error(
        'fits: capacity wants a size like 16GiB, 80GB or 1000000, got '
        || $capacity
      )
    END AS bytes
),
module_rows AS (
  SELECT
    m.module_id,
    m.module_name AS program,
    s.value AS size_value,
    TRY_CAST(s.value AS DOUBLE) AS size_number,
    coalesce(m.xla_peak_bytes, m.heap_peak_bytes) AS peak_bytes,
    t.capacity_bytes AS target_capacity,
    t.capacity_source AS target_source,
    (
      SELECT string_agg(l.key || '=' || l.value, ',' ORDER BY l.key, l.value)
      FROM labels AS l
      WHERE l.module_id = m.module_id AND l.key <> $swept
    ) AS labels
  FROM modules AS m
  JOIN labels AS s
    ON s.module_id = m.module_id AND s.key = $swept
  LEFT JOIN module_targets AS t
    ON t.module_id = m.module_id
  WHERE
    $label IS NULL
    OR m.module_id IN (
      SELECT module_id FROM labels WHERE key || '=' || value = $label
    )
),
oom_rows AS (
  SELECT
    e.event_id,
    e.program_name AS program,
    s.value AS size_value,
    TRY_CAST(s.value AS DOUBLE) AS size_number,
    coalesce(e.used_bytes, e.requested_bytes, e.total_usage_bytes)
      AS peak_bytes,
    e.capacity_bytes AS oom_capacity,
    (
      SELECT string_agg(l.key || '=' || l.value, ',' ORDER BY l.key, l.value)
      FROM oom_labels AS l
      WHERE l.event_id = e.event_id AND l.key <> $swept
    ) AS labels
  FROM oom_events AS e
  JOIN oom_labels AS s
    ON s.event_id = e.event_id AND s.key = $swept
  WHERE
    $label IS NULL
    OR e.event_id IN (
      SELECT event_id FROM oom_labels WHERE key || '=' || value = $label
    )
),
judged AS (
  SELECT
    r.module_id, r.program, r.labels, r.size_value, r.size_number,
    'compile' AS kind,
    r.peak_bytes,
    coalesce(p.bytes, r.target_capacity) AS capacity_bytes,
    CASE WHEN p.bytes IS NOT NULL THEN 'param' ELSE r.target_source END
      AS capacity_source
  FROM module_rows AS r
  CROSS JOIN capacity_param AS p
  UNION ALL
  SELECT
    NULL, o.program, o.labels, o.size_value, o.size_number, 'oom',
    o.peak_bytes,
    coalesce(p.bytes, o.oom_capacity),
    CASE
      WHEN p.bytes IS NOT NULL THEN 'param'
      WHEN o.oom_capacity IS NOT NULL THEN 'oom'
    END
  FROM oom_rows AS o
  CROSS JOIN capacity_param AS p
),
verdicts AS (
  SELECT
    *,
    capacity_bytes - peak_bytes AS headroom_bytes,
    round(100.0 * (capacity_bytes - peak_bytes) / nullif(capacity_bytes, 0), 2)
      AS headroom_pct,
    kind = 'compile'
    AND capacity_bytes IS NOT NULL
    AND peak_bytes IS NOT NULL
    AND (capacity_bytes - peak_bytes) * 100.0
      >= $min_headroom * capacity_bytes AS fits
  FROM judged
),
sweeps AS (
  SELECT
    program,
    labels,
    max(CASE WHEN fits THEN size_number END) AS largest_fitting,
    min(CASE WHEN NOT fits THEN size_number END) AS smallest_failing,
    regr_slope(
      CASE WHEN fits THEN peak_bytes END, CASE WHEN fits THEN size_number END
    ) AS slope,
    regr_intercept(
      CASE WHEN fits THEN peak_bytes END, CASE WHEN fits THEN size_number END
    ) AS intercept,
    max(CASE WHEN fits THEN capacity_bytes END) AS capacity,
    count(*) FILTER (WHERE fits) AS n,
    sum(size_number) FILTER (WHERE fits) AS sx,
    sum(peak_bytes::DOUBLE) FILTER (WHERE fits) AS sy,
    sum(size_number * size_number) FILTER (WHERE fits) AS sxx,
    sum(size_number * peak_bytes::DOUBLE) FILTER (WHERE fits) AS sxy
  FROM verdicts
  GROUP BY program, labels
),
held_out AS (
  -- each fitting compile left out of the line in turn: the sums without
  -- it give the line of the others, which predicts its peak
  SELECT
    v.program,
    v.labels,
    max(
      abs(
        (
          ((s.n - 1) * (s.sxy - v.size_number * v.peak_bytes)
            - (s.sx - v.size_number) * (s.sy - v.peak_bytes))
          / nullif(
            (s.n - 1) * (s.sxx - v.size_number * v.size_number)
            - (s.sx - v.size_number) ^ 2,
            0
          )
        ) * v.size_number
        + (
          (s.sy - v.peak_bytes)
          - (
            ((s.n - 1) * (s.sxy - v.size_number * v.peak_bytes)
              - (s.sx - v.size_number) * (s.sy - v.peak_bytes))
            / nullif(
              (s.n - 1) * (s.sxx - v.size_number * v.size_number)
              - (s.sx - v.size_number) ^ 2,
              0
            )
          ) * (s.sx - v.size_number)
        ) / (s.n - 1)
        - v.peak_bytes
      ) / v.peak_bytes
    ) * 100 AS heldout_error_pct
  FROM verdicts AS v
  JOIN sweeps AS s
    ON
      s.program IS NOT DISTINCT FROM v.program
      AND s.labels IS NOT DISTINCT FROM v.labels
  WHERE v.fits AND s.n >= 3
  GROUP BY v.program, v.labels
),
at_limit AS (
  SELECT v.program, v.labels, v.module_id
  FROM verdicts AS v
  JOIN sweeps AS s
    ON
      s.program IS NOT DISTINCT FROM v.program
      AND s.labels IS NOT DISTINCT FROM v.labels
  WHERE v.fits AND v.size_number = s.largest_fitting
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
  v.headroom_pct,
  v.fits,
  s.largest_fitting,
  s.smallest_failing,
  CASE WHEN s.n >= 2 THEN round(s.slope, 3) END AS bytes_per_unit,
  CASE WHEN s.n >= 2 THEN CAST(
    floor(
      (s.capacity * (1 - $min_headroom / 100.0) - s.intercept)
      / nullif(s.slope, 0)
    )
    AS BIGINT
  ) END AS predicted_limit,
  round(h.heldout_error_pct, 2) AS heldout_error_pct,
  c.category AS dominant_category
FROM verdicts AS v
LEFT JOIN sweeps AS s
  ON
    s.program IS NOT DISTINCT FROM v.program
    AND s.labels IS NOT DISTINCT FROM v.labels
LEFT JOIN held_out AS h
  ON
    h.program IS NOT DISTINCT FROM v.program
    AND h.labels IS NOT DISTINCT FROM v.labels
LEFT JOIN categories AS c
  ON
    c.program IS NOT DISTINCT FROM v.program
    AND c.labels IS NOT DISTINCT FROM v.labels
    AND c.nth = 1
ORDER BY v.program, v.labels, v.size_number, v.kind
