-- name: diff-causes
-- description: Each matched module pair's change in total bytes and in the chosen peak, attributed to causes; the rows of a pair and measure sum exactly to the change.
-- param measures VARCHAR[] = NULL: The figures to explain: total_bytes and the chosen peak (heap_peak_bytes or logical_peak_bytes).
-- column pair: Pair number (pairs.pair).
-- column module_name: Module name (jit name).
-- column measure: The figure explained: total_bytes, heap_peak_bytes or logical_peak_bytes.
-- column cause: shape, dtype, layout, new-buffer, gone-buffer, longer-live, shorter-live, aliasing-lost, aliasing-gained, fusion, fragmentation (other for logical_peak_bytes), or no-peak when a side lacks the figure.
-- column bytes: Signed bytes this row adds to the change (head minus base); NULL for no-peak.
-- column buffers: Value pairs (or one-sided values) in the row.
-- column matched_by: How the values were paired (diff-matched's passes); NULL for values on one side only and for the residual rows.
-- column op_name: Framework op name (head's, else base's), without `jit(main)/`.
-- column source: source_file:source_line of the op (head's, else base's).
-- column base_shape: Shape without layout on the base side; NULL when the value is on the head only.
-- column head_shape: Shape without layout on the head side; NULL when the value is on the base only.
-- column base_instruction: A defining instruction on the base side (the first by name).
-- column head_instruction: A defining instruction on the head side (the first by name).
-- column base_bytes: What the row's values count in the measure on the base side; for no-peak, the base figure (NULL when it is the missing one).
-- column head_bytes: What they count on the head side; for no-peak, the head figure.
-- note: The rule (docs/diff.md): each side's figure is the sum of its member values' sizes plus a residual. Every value is in one row: paired values add head size minus base size (0 for a side where the value is not a member), and the residual's change is the fragmentation (other) row, so the rows of a pair and measure sum to the figure's change by construction.
-- note: Runs on a scratch connection over Arrow tables `pairs`, `base_modules` / `head_modules` (the modules query), `base_values` / `head_values` (diff-values), `matched` (diff-matched) and `base_members` / `head_members` (module_id, measure, value_id, size: the values each measure counts).
WITH measures AS (
  SELECT
    unnest($measures) AS measure,
    generate_subscripts($measures, 1) AS ordinal
),
figures AS (
  SELECT
    p.pair, p.module_name, p.base_module_id, p.head_module_id,
    m.measure, m.ordinal,
    CASE m.measure
      WHEN 'total_bytes' THEN b.total_bytes
      WHEN 'heap_peak_bytes' THEN b.heap_peak_bytes
      WHEN 'logical_peak_bytes' THEN b.logical_peak_bytes
    END AS base_figure,
    CASE m.measure
      WHEN 'total_bytes' THEN h.total_bytes
      WHEN 'heap_peak_bytes' THEN h.heap_peak_bytes
      WHEN 'logical_peak_bytes' THEN h.logical_peak_bytes
    END AS head_figure
  FROM pairs AS p
  CROSS JOIN measures AS m
  JOIN base_modules AS b
    ON b.module_id = p.base_module_id
  JOIN head_modules AS h
    ON h.module_id = p.head_module_id
),
known AS (
  SELECT *
  FROM figures
  WHERE base_figure IS NOT NULL AND head_figure IS NOT NULL
),
vals AS (
  SELECT
    f.pair, f.measure, x.matched_by,
    b.value_id AS base_value_id, h.value_id AS head_value_id,
    b.op_name AS base_op, h.op_name AS head_op,
    b.shape AS base_shape, h.shape AS head_shape,
    b.dims AS base_dims, h.dims AS head_dims,
    b.element_type AS base_type, h.element_type AS head_type,
    b.category AS base_category, h.category AS head_category,
    b.instruction AS base_instruction, h.instruction AS head_instruction,
    coalesce(h.source, b.source) AS source,
    bm.size AS base_bytes, hm.size AS head_bytes
  FROM matched AS x
  JOIN known AS f
    ON f.pair = x.pair
  LEFT JOIN base_values AS b
    ON b.module_id = f.base_module_id AND b.value_id = x.base_value_id
  LEFT JOIN head_values AS h
    ON h.module_id = f.head_module_id AND h.value_id = x.head_value_id
  LEFT JOIN base_members AS bm
    ON bm.module_id = f.base_module_id
    AND bm.measure = f.measure
    AND bm.value_id = x.base_value_id
  LEFT JOIN head_members AS hm
    ON hm.module_id = f.head_module_id
    AND hm.measure = f.measure
    AND hm.value_id = x.head_value_id
  WHERE bm.size IS NOT NULL OR hm.size IS NOT NULL
),
-- the (op_name, shape) of every value on each side: a one-sided value whose op
-- has values on the other side is one more copy, or a split or merge
base_ops AS (
  SELECT DISTINCT p.pair, v.op_name, v.shape
  FROM base_values AS v
  JOIN pairs AS p
    ON p.base_module_id = v.module_id
  WHERE v.op_name IS NOT NULL AND p.head_module_id IS NOT NULL
),
head_ops AS (
  SELECT DISTINCT p.pair, v.op_name, v.shape
  FROM head_values AS v
  JOIN pairs AS p
    ON p.head_module_id = v.module_id
  WHERE v.op_name IS NOT NULL AND p.base_module_id IS NOT NULL
),
head_only AS (
  SELECT
    v.pair, v.head_value_id,
    bool_or(o.shape = v.head_shape) AS same_shape,
    count(o.op_name) > 0 AS same_op
  FROM vals AS v
  LEFT JOIN base_ops AS o
    ON o.pair = v.pair AND o.op_name = v.head_op
  WHERE v.base_value_id IS NULL
  GROUP BY v.pair, v.head_value_id
),
base_only AS (
  SELECT
    v.pair, v.base_value_id,
    bool_or(o.shape = v.base_shape) AS same_shape,
    count(o.op_name) > 0 AS same_op
  FROM vals AS v
  LEFT JOIN head_ops AS o
    ON o.pair = v.pair AND o.op_name = v.base_op
  WHERE v.head_value_id IS NULL
  GROUP BY v.pair, v.base_value_id
),
classified AS (
  SELECT
    v.*,
    CAST(coalesce(v.head_bytes, 0) - coalesce(v.base_bytes, 0) AS BIGINT)
      AS delta,
    CASE
      WHEN v.base_bytes IS NOT NULL AND v.head_bytes IS NOT NULL THEN
        CASE
          WHEN v.base_bytes = v.head_bytes THEN NULL
          WHEN v.base_dims IS DISTINCT FROM v.head_dims
            OR (
              v.base_type IS NULL
              AND v.base_shape IS DISTINCT FROM v.head_shape
            )
            THEN 'shape'
          WHEN v.base_type IS DISTINCT FROM v.head_type THEN 'dtype'
          ELSE 'layout'
        END
      WHEN v.head_bytes IS NOT NULL AND v.base_value_id IS NOT NULL THEN
        CASE
          WHEN v.base_category = 'temp' THEN 'longer-live'
          ELSE 'aliasing-lost'
        END
      WHEN v.base_bytes IS NOT NULL AND v.head_value_id IS NOT NULL THEN
        CASE
          WHEN v.head_category = 'temp' THEN 'shorter-live'
          ELSE 'aliasing-gained'
        END
      WHEN v.head_bytes IS NOT NULL THEN
        CASE
          WHEN ho.same_shape THEN 'longer-live'
          WHEN ho.same_op THEN 'fusion'
          ELSE 'new-buffer'
        END
      ELSE
        CASE
          WHEN bo.same_shape THEN 'shorter-live'
          WHEN bo.same_op THEN 'fusion'
          ELSE 'gone-buffer'
        END
    END AS cause
  FROM vals AS v
  LEFT JOIN head_only AS ho
    ON ho.pair = v.pair
    AND ho.head_value_id = v.head_value_id
    AND v.base_value_id IS NULL
  LEFT JOIN base_only AS bo
    ON bo.pair = v.pair
    AND bo.base_value_id = v.base_value_id
    AND v.head_value_id IS NULL
),
grouped AS (
  SELECT
    pair, measure, cause, matched_by,
    coalesce(head_op, base_op) AS op_name,
    source, base_shape, head_shape,
    CAST(sum(delta) AS BIGINT) AS bytes,
    count(*) AS buffers,
    min(base_instruction) AS base_instruction,
    min(head_instruction) AS head_instruction,
    CAST(sum(base_bytes) AS BIGINT) AS base_bytes,
    CAST(sum(head_bytes) AS BIGINT) AS head_bytes
  FROM classified
  WHERE cause IS NOT NULL
  GROUP BY ALL
),
residual AS (
  -- what the member values leave unexplained: packing, alignment, values the
  -- membership rule does not list
  SELECT
    f.pair, f.measure,
    CASE f.measure
      WHEN 'logical_peak_bytes' THEN 'other'
      ELSE 'fragmentation'
    END AS cause,
    CAST(
      (f.head_figure - f.base_figure) - coalesce((
        SELECT sum(g.bytes)
        FROM grouped AS g
        WHERE g.pair = f.pair AND g.measure = f.measure
      ), 0) AS BIGINT
    ) AS bytes
  FROM known AS f
),
no_peak AS (
  SELECT pair, measure, base_figure, head_figure
  FROM figures
  WHERE base_figure IS NULL OR head_figure IS NULL
),
rows AS (
  SELECT
    pair, measure, cause, bytes, buffers, matched_by, op_name, source,
    base_shape, head_shape, base_instruction, head_instruction,
    base_bytes, head_bytes
  FROM grouped
  UNION ALL
  SELECT
    pair, measure, cause, bytes, 0,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM residual
  WHERE bytes <> 0
  UNION ALL
  SELECT
    pair, measure, 'no-peak', NULL, 0,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    base_figure, head_figure
  FROM no_peak
)
SELECT
  r.pair,
  f.module_name,
  r.measure,
  r.cause,
  r.bytes,
  CAST(r.buffers AS BIGINT) AS buffers,
  r.matched_by,
  r.op_name,
  r.source,
  r.base_shape,
  r.head_shape,
  r.base_instruction,
  r.head_instruction,
  r.base_bytes,
  r.head_bytes
FROM rows AS r
JOIN figures AS f
  ON f.pair = r.pair AND f.measure = r.measure
ORDER BY
  f.ordinal,
  r.pair,
  abs(r.bytes) DESC NULLS FIRST,
  r.cause,
  r.op_name NULLS LAST,
  r.source NULLS LAST,
  r.base_shape NULLS LAST,
  r.head_shape NULLS LAST
