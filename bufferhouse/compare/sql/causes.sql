-- name: diff-causes
-- description: Each matched module pair's change in total bytes and in the chosen peak, attributed to causes; the rows of a pair and measure sum exactly to the change.
-- param measures VARCHAR[] = NULL: The figures to explain: total_bytes and the chosen peak (heap_peak_bytes or logical_peak_bytes).
-- column pair: Pair number (pairs.pair).
-- column module_name: Module name (jit name).
-- column measure: The figure explained: total_bytes, heap_peak_bytes or logical_peak_bytes.
-- column cause: sharding, shape, dtype, layout, new-buffer, gone-buffer, longer-live, shorter-live, aliasing-lost, aliasing-gained, memory-space, fusion, fragmentation (other for logical_peak_bytes), or no-peak when a side lacks the figure.
-- column bytes: Signed bytes this row adds to the change (head minus base); NULL for no-peak.
-- column buffers: Allocations (other than temp) or temp values, paired or one-sided, in the row.
-- column matched_by: `allocation` for a paired allocation (paired by what it holds), else how the values were paired (diff-matched's passes); NULL for values on one side only and for the residual rows.
-- column op_name: Framework op name (head's, else base's), without `jit(main)/`.
-- column source: source_file:source_line of the op (head's, else base's).
-- column base_shape: Shape without layout on the base side; NULL when the value is on the head only.
-- column head_shape: Shape without layout on the head side; NULL when the value is on the base only.
-- column base_instruction: A defining instruction on the base side (the first by name).
-- column head_instruction: A defining instruction on the head side (the first by name).
-- column base_bytes: What the row's values count in the measure on the base side; for no-peak, the base figure (NULL when it is the missing one).
-- column head_bytes: What they count on the head side; for no-peak, the head figure.
-- column sharding_change: For a sharding row, the sharding that changed (`parameter 0{} OLD -> NEW`, `result {0} OLD -> NEW`): the value's parameter's, the result's for an output, else every one of the pair's; NULL otherwise.
-- note: The rule (docs/diff.md): each side's figure is the sum of its units plus a residual. A unit is an allocation other than temp (counted whole, at its member's size, whichever of its values shows it) or a temp value (each printed peak-list value, for the logical peak). Allocations pair across the sides by what they hold: the same entry parameter, else mutually the most of each other's values' partners. A paired allocation's change splits into what its shared values' largest size moved (shape, dtype or layout of the values held on both sides; sharding instead of shape when the pair is partitioned another way: a parameter or result sharding differs and every entry parameter's logical dimensions, per-device ones times the sharding's tiles, are equal, and the values kept their rank and type) and the rest (aliasing-gained or -lost: only when the set of values sharing it changed, else layout). An allocation on one side only is aliasing when its values' partners sit in another allocation other than temp there, liveness when in temp, memory-space when its partner is counted in no measure of that space; temp values pair as the values do. Every unit is in one row and the residual's change is the fragmentation (other) row, so the rows of a pair and measure sum to the figure's change by construction.
-- note: Runs on a scratch connection over Arrow tables `pairs`, `base_modules` / `head_modules` (the modules query: the figures and alias_bytes), `base_values` / `head_values` (diff-values), `base_shardings` / `head_shardings` (diff-shardings), `matched` (diff-matched) and `base_members` / `head_members` (module_id, measure, value_id, size: the values each measure counts).
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
    END AS head_figure,
    b.alias_bytes AS base_alias, h.alias_bytes AS head_alias
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
-- every value of each side, with its pair
bv AS MATERIALIZED (
  SELECT p.pair, v.*
  FROM base_values AS v
  JOIN pairs AS p
    ON p.base_module_id = v.module_id
  WHERE p.head_module_id IS NOT NULL
),
hv AS MATERIALIZED (
  SELECT p.pair, v.*
  FROM head_values AS v
  JOIN pairs AS p
    ON p.head_module_id = v.module_id
  WHERE p.base_module_id IS NOT NULL
),
-- the shardings of each side's entry parameters and results, and those that
-- differ between the sides (NULL: the array is not partitioned on that side)
base_sh AS (
  SELECT p.pair, s.*
  FROM base_shardings AS s
  JOIN pairs AS p
    ON p.base_module_id = s.module_id
),
head_sh AS (
  SELECT p.pair, s.*
  FROM head_shardings AS s
  JOIN pairs AS p
    ON p.head_module_id = s.module_id
),
resharded AS MATERIALIZED (
  SELECT
    coalesce(b.pair, h.pair) AS pair,
    coalesce(b.target, h.target) AS target,
    coalesce(b.parameter, h.parameter) AS parameter,
    CASE coalesce(b.target, h.target)
      WHEN 'parameter' THEN 'parameter ' || coalesce(b.parameter, h.parameter)
      ELSE 'result ' || coalesce(b.shape_index, h.shape_index)
    END || ' ' || coalesce(b.sharding, '(not partitioned)') || ' -> '
      || coalesce(h.sharding, '(not partitioned)') AS change
  FROM base_sh AS b
  FULL JOIN head_sh AS h
    ON h.pair = b.pair AND h.target = b.target
      AND h.parameter IS NOT DISTINCT FROM b.parameter
      AND h.shape_index = b.shape_index
  WHERE b.sharding IS DISTINCT FROM h.sharding
),
-- each entry parameter's logical dimensions: its per-device ones times the
-- pieces its sharding cuts each into
base_logical AS (
  SELECT
    v.pair, v.parameter,
    list_transform(generate_series(1, len(v.dims)),
      lambda d: v.dims[d] * coalesce(s.tiles[d], 1)) AS logical
  FROM bv AS v
  LEFT JOIN base_sh AS s
    ON s.pair = v.pair AND s.parameter = v.parameter
  WHERE v.parameter IS NOT NULL AND v.dims IS NOT NULL
),
head_logical AS (
  SELECT
    v.pair, v.parameter,
    list_transform(generate_series(1, len(v.dims)),
      lambda d: v.dims[d] * coalesce(s.tiles[d], 1)) AS logical
  FROM hv AS v
  LEFT JOIN head_sh AS s
    ON s.pair = v.pair AND s.parameter = v.parameter
  WHERE v.parameter IS NOT NULL AND v.dims IS NOT NULL
),
-- a pair partitioned another way: a sharding differs, and every entry
-- parameter has the same logical dimensions on both sides (the same
-- program's arrays, cut into other pieces): its values' per-device shapes
-- change because their sharding did
repartitioned AS MATERIALIZED (
  SELECT
    r.pair,
    string_agg(r.change, '; ' ORDER BY r.target DESC, r.parameter, r.change)
      AS change,
    string_agg(r.change, '; ' ORDER BY r.change)
      FILTER (WHERE r.target = 'output') AS output_change
  FROM resharded AS r
  WHERE r.pair NOT IN (
    SELECT coalesce(b.pair, h.pair)
    FROM base_logical AS b
    FULL JOIN head_logical AS h
      ON h.pair = b.pair AND h.parameter = b.parameter
    WHERE b.logical IS DISTINCT FROM h.logical
  )
  GROUP BY r.pair
),
-- each value pair (or one-sided value) with the allocations on both sides
vp AS MATERIALIZED (
  SELECT
    x.pair, x.matched_by, x.base_value_id, x.head_value_id,
    b.allocation_index AS base_alloc, h.allocation_index AS head_alloc,
    b.category AS base_category, h.category AS head_category,
    b.size AS base_size, h.size AS head_size,
    b.dims AS base_dims, h.dims AS head_dims,
    b.shape AS base_shape, h.shape AS head_shape,
    b.element_type AS base_type, h.element_type AS head_type
  FROM matched AS x
  LEFT JOIN bv AS b
    ON b.pair = x.pair AND b.value_id = x.base_value_id
  LEFT JOIN hv AS h
    ON h.pair = x.pair AND h.value_id = x.head_value_id
),
-- the allocations other than temp paired by what they hold: base allocation A
-- and head allocation B pair when each is the other's best: the one holding
-- the same entry parameter, else the one holding the most of its values'
-- partners (then the lower index)
links AS (
  SELECT
    pair, base_alloc, head_alloc,
    bool_or(matched_by = 'parameter') AS same_parameter,
    count(*) AS n
  FROM vp
  WHERE base_category <> 'temp' AND head_category <> 'temp'
  GROUP BY pair, base_alloc, head_alloc
),
ranked_links AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, base_alloc
        ORDER BY same_parameter DESC, n DESC, head_alloc
    ) AS base_rank,
    row_number() OVER (
      PARTITION BY pair, head_alloc
        ORDER BY same_parameter DESC, n DESC, base_alloc
    ) AS head_rank
  FROM links
),
alloc_pairs AS MATERIALIZED (
  SELECT pair, base_alloc, head_alloc
  FROM ranked_links
  WHERE base_rank = 1 AND head_rank = 1
),
-- inside each paired allocation: the values it holds on both sides, the
-- largest of them on each side, and whether the set of values changed
inside AS MATERIALIZED (
  SELECT
    ap.pair, ap.base_alloc, ap.head_alloc,
    max(vp.base_size) AS shared_base,
    max(vp.head_size) AS shared_head,
    count(*) AS shared,
    bool_or(vp.base_size <> vp.head_size AND (
      vp.base_dims IS DISTINCT FROM vp.head_dims
      OR (vp.base_type IS NULL
        AND vp.base_shape IS DISTINCT FROM vp.head_shape)
    )) AS reshaped,
    bool_or(vp.base_size <> vp.head_size
      AND vp.base_type IS DISTINCT FROM vp.head_type) AS retyped,
    -- a dimension changed, the rank and type kept: what a new sharding does
    bool_and(vp.base_size = vp.head_size OR (vp.base_type = vp.head_type
      AND len(vp.base_dims) = len(vp.head_dims))) AS recut,
    arg_max(vp.base_value_id, (vp.head_size, vp.base_size, -vp.head_value_id))
      AS base_value_id,
    arg_max(vp.head_value_id, (vp.head_size, vp.base_size, -vp.head_value_id))
      AS head_value_id
  FROM alloc_pairs AS ap
  JOIN vp
    ON vp.pair = ap.pair
    AND vp.base_alloc = ap.base_alloc
    AND vp.head_alloc = ap.head_alloc
  GROUP BY ap.pair, ap.base_alloc, ap.head_alloc
),
held AS (
  SELECT ap.pair, ap.base_alloc, ap.head_alloc, b.n AS base_held,
    h.n AS head_held
  FROM alloc_pairs AS ap
  JOIN (
    SELECT pair, allocation_index, count(*) AS n
    FROM bv
    WHERE category <> 'temp'
    GROUP BY pair, allocation_index
  ) AS b
    ON b.pair = ap.pair AND b.allocation_index = ap.base_alloc
  JOIN (
    SELECT pair, allocation_index, count(*) AS n
    FROM hv
    WHERE category <> 'temp'
    GROUP BY pair, allocation_index
  ) AS h
    ON h.pair = ap.pair AND h.allocation_index = ap.head_alloc
),
-- where the values of each allocation other than temp went on the other side
base_fate AS (
  SELECT
    pair, base_alloc AS alloc,
    bool_or(head_category <> 'temp') AS to_shared,
    bool_or(head_category = 'temp') AS to_temp
  FROM vp
  WHERE base_category <> 'temp' AND head_value_id IS NOT NULL
  GROUP BY pair, base_alloc
),
head_fate AS (
  SELECT
    pair, head_alloc AS alloc,
    bool_or(base_category <> 'temp') AS to_shared,
    bool_or(base_category = 'temp') AS to_temp
  FROM vp
  WHERE head_category <> 'temp' AND base_value_id IS NOT NULL
  GROUP BY pair, head_alloc
),
-- what each measure counts on each side: an allocation other than temp counts
-- whole (one unit, whichever value shows it); a temp value counts itself (and
-- every printed peak-list value in the logical peak)
base_units AS MATERIALIZED (
  SELECT
    f.pair, f.measure, m.value_id, m.size, v.allocation_index, v.category,
    f.measure <> 'logical_peak_bytes' AND v.category <> 'temp' AS whole
  FROM known AS f
  JOIN base_members AS m
    ON m.module_id = f.base_module_id AND m.measure = f.measure
  JOIN bv AS v
    ON v.pair = f.pair AND v.value_id = m.value_id
),
head_units AS MATERIALIZED (
  SELECT
    f.pair, f.measure, m.value_id, m.size, v.allocation_index, v.category,
    f.measure <> 'logical_peak_bytes' AND v.category <> 'temp' AS whole
  FROM known AS f
  JOIN head_members AS m
    ON m.module_id = f.head_module_id AND m.measure = f.measure
  JOIN hv AS v
    ON v.pair = f.pair AND v.value_id = m.value_id
),
base_whole AS (
  SELECT
    u.pair, u.measure, u.allocation_index AS alloc,
    CAST(sum(u.size) AS BIGINT) AS size, min(u.value_id) AS value_id,
    min(u.category) AS category, ap.head_alloc AS partner
  FROM base_units AS u
  LEFT JOIN alloc_pairs AS ap
    ON ap.pair = u.pair AND ap.base_alloc = u.allocation_index
  WHERE u.whole
  GROUP BY u.pair, u.measure, u.allocation_index, ap.head_alloc
),
head_whole AS (
  SELECT
    u.pair, u.measure, u.allocation_index AS alloc,
    CAST(sum(u.size) AS BIGINT) AS size, min(u.value_id) AS value_id,
    min(u.category) AS category, ap.base_alloc AS partner
  FROM head_units AS u
  LEFT JOIN alloc_pairs AS ap
    ON ap.pair = u.pair AND ap.head_alloc = u.allocation_index
  WHERE u.whole
  GROUP BY u.pair, u.measure, u.allocation_index, ap.base_alloc
),
-- each counted allocation, with its partner's count on the other side
whole AS (
  SELECT
    coalesce(b.pair, h.pair) AS pair,
    coalesce(b.measure, h.measure) AS measure,
    coalesce(b.alloc, h.partner) AS base_alloc,
    coalesce(h.alloc, b.partner) AS head_alloc,
    b.size AS base_bytes, h.size AS head_bytes,
    b.value_id AS base_member, h.value_id AS head_member,
    b.category AS base_category, h.category AS head_category
  FROM base_whole AS b
  FULL JOIN head_whole AS h
    ON h.pair = b.pair AND h.measure = b.measure AND h.alloc = b.partner
),
-- a paired allocation's change, split: what its shared values' largest size
-- moved by (their shape, type or layout), and the rest, which only a change
-- in the set of values sharing it can move
whole_split AS (
  SELECT
    w.pair, w.measure, 'allocation' AS matched_by,
    i.base_value_id, i.head_value_id,
    CASE
      WHEN i.reshaped AND i.recut AND rp.pair IS NOT NULL THEN 'sharding'
      WHEN i.reshaped THEN 'shape'
      WHEN i.retyped THEN 'dtype'
      ELSE 'layout'
    END AS cause,
    CAST(i.shared_head - i.shared_base AS BIGINT) AS delta,
    w.base_bytes, w.head_bytes
  FROM whole AS w
  JOIN inside AS i
    ON i.pair = w.pair AND i.base_alloc = w.base_alloc
      AND i.head_alloc = w.head_alloc
  LEFT JOIN repartitioned AS rp
    ON rp.pair = w.pair
  WHERE w.base_bytes IS NOT NULL AND w.head_bytes IS NOT NULL
  UNION ALL
  SELECT
    w.pair, w.measure, 'allocation',
    i.base_value_id, i.head_value_id,
    CASE
      WHEN hd.base_held = i.shared AND hd.head_held = i.shared THEN 'layout'
      WHEN (w.head_bytes - w.base_bytes) - (i.shared_head - i.shared_base) > 0
        THEN 'aliasing-gained'
      ELSE 'aliasing-lost'
    END,
    CAST((w.head_bytes - w.base_bytes) - (i.shared_head
      - i.shared_base) AS BIGINT),
    -- the allocation's counts are on its first row only
    NULL, NULL
  FROM whole AS w
  JOIN inside AS i
    ON i.pair = w.pair AND i.base_alloc = w.base_alloc
      AND i.head_alloc = w.head_alloc
  JOIN held AS hd
    ON hd.pair = w.pair AND hd.base_alloc = w.base_alloc
      AND hd.head_alloc = w.head_alloc
  WHERE w.base_bytes IS NOT NULL AND w.head_bytes IS NOT NULL
),
-- an allocation counted on one side only: paired but not counted on the other
-- (another memory space), or unpaired: its values now share (or no longer
-- share) another allocation, moved into (out of) temp, or have no partner
whole_single AS (
  SELECT
    w.pair, w.measure,
    CASE
      WHEN w.base_bytes IS NOT NULL AND w.head_alloc IS NOT NULL
        OR w.head_bytes IS NOT NULL AND w.base_alloc IS NOT NULL
        THEN 'allocation'
      ELSE coalesce(pb.matched_by, ph.matched_by)
    END AS matched_by,
    -- the value showing the allocation, and its partner on the other side
    coalesce(w.base_member, ph.base_value_id) AS base_value_id,
    coalesce(w.head_member, pb.head_value_id) AS head_value_id,
    CASE
      WHEN w.base_bytes IS NOT NULL
        AND w.head_alloc IS NOT NULL THEN 'memory-space'
      WHEN w.head_bytes IS NOT NULL
        AND w.base_alloc IS NOT NULL THEN 'memory-space'
      WHEN w.base_bytes IS NOT NULL AND bf.to_shared THEN 'aliasing-gained'
      -- an output allocation of its own on one side, its values in temp on
      -- the other, where that other side aliases more of its outputs to its
      -- parameters: the result is (no longer) written into a donated buffer
      WHEN w.base_bytes IS NOT NULL AND bf.to_temp
        AND w.base_category = 'output' AND f.head_alias > f.base_alias
        THEN 'aliasing-gained'
      WHEN w.base_bytes IS NOT NULL AND bf.to_temp THEN 'shorter-live'
      WHEN w.head_bytes IS NOT NULL AND hf.to_shared THEN 'aliasing-lost'
      WHEN w.head_bytes IS NOT NULL AND hf.to_temp
        AND w.head_category = 'output' AND f.base_alias > f.head_alias
        THEN 'aliasing-lost'
      WHEN w.head_bytes IS NOT NULL AND hf.to_temp THEN 'longer-live'
    END AS cause,
    CAST(coalesce(w.head_bytes, 0) - coalesce(w.base_bytes,
      0) AS BIGINT) AS delta,
    w.base_bytes, w.head_bytes
  FROM whole AS w
  JOIN known AS f
    ON f.pair = w.pair AND f.measure = w.measure
  LEFT JOIN base_fate AS bf
    ON bf.pair = w.pair AND bf.alloc = w.base_alloc AND w.head_bytes IS NULL
  LEFT JOIN head_fate AS hf
    ON hf.pair = w.pair AND hf.alloc = w.head_alloc AND w.base_bytes IS NULL
  LEFT JOIN vp AS pb
    ON pb.pair = w.pair AND pb.base_value_id = w.base_member
      AND w.head_bytes IS NULL
  LEFT JOIN vp AS ph
    ON ph.pair = w.pair AND ph.head_value_id = w.head_member
      AND w.base_bytes IS NULL
  WHERE w.base_bytes IS NULL OR w.head_bytes IS NULL
),
-- the values counted one by one (temp values; the logical peak's), with the
-- unpaired members of counted allocations whose values have no partner
vals AS (
  SELECT
    f.pair, f.measure, x.matched_by,
    x.base_value_id, x.head_value_id,
    x.base_shape, x.head_shape,
    x.base_dims, x.head_dims,
    x.base_type, x.head_type,
    x.base_category, x.head_category,
    x.base_size, x.head_size,
    bm.size AS base_bytes, hm.size AS head_bytes
  FROM vp AS x
  JOIN known AS f
    ON f.pair = x.pair
  LEFT JOIN base_units AS bm
    ON bm.pair = f.pair
    AND bm.measure = f.measure
    AND bm.value_id = x.base_value_id
    AND NOT bm.whole
  LEFT JOIN head_units AS hm
    ON hm.pair = f.pair
    AND hm.measure = f.measure
    AND hm.value_id = x.head_value_id
    AND NOT hm.whole
  WHERE bm.size IS NOT NULL OR hm.size IS NOT NULL
),
-- the values counted one by one (temp values, the logical peak's entries):
-- a pair counted on both sides changed shape, type or layout; a value
-- counted on one side, its partner uncounted on the other (not held at the
-- peak there, or held whole in an allocation that counts as a unit), is
-- liveness for its partner's bytes and shape, type or layout for the rest
value_kinds AS (
  SELECT
    x.*,
    CASE
      WHEN rp.pair IS NOT NULL AND base_dims <> head_dims
        AND base_type = head_type AND len(base_dims) = len(head_dims)
        THEN 'sharding'
      WHEN base_dims IS DISTINCT FROM head_dims
        OR (base_type IS NULL AND base_shape IS DISTINCT FROM head_shape)
        THEN 'shape'
      WHEN base_type IS DISTINCT FROM head_type THEN 'dtype'
      ELSE 'layout'
    END AS kind,
    base_value_id IS NOT NULL AND head_value_id IS NOT NULL
      AND (base_bytes IS NULL OR head_bytes IS NULL) AS one_counted
  FROM vals AS x
  LEFT JOIN repartitioned AS rp
    ON rp.pair = x.pair
),
value_rows AS (
  SELECT
    pair, measure, matched_by, base_value_id, head_value_id,
    CASE
      WHEN NOT one_counted THEN
        CASE
          WHEN base_bytes IS NOT NULL AND head_bytes IS NOT NULL THEN kind
        END
      WHEN head_bytes IS NOT NULL THEN 'longer-live'
      ELSE 'shorter-live'
    END AS cause,
    CAST(
      CASE
        WHEN NOT one_counted
          THEN coalesce(head_bytes, 0) - coalesce(base_bytes, 0)
        WHEN head_bytes IS NOT NULL THEN least(base_size, head_bytes)
        ELSE -least(head_size, base_bytes)
      END AS BIGINT
    ) AS delta,
    base_bytes, head_bytes
  FROM value_kinds
  UNION ALL
  SELECT
    pair, measure, matched_by, base_value_id, head_value_id, kind,
    CAST(
      CASE
        WHEN head_bytes IS NOT NULL
          THEN head_bytes - least(base_size, head_bytes)
        ELSE least(head_size, base_bytes) - base_bytes
      END AS BIGINT
    ),
    NULL, NULL
  FROM value_kinds
  WHERE one_counted
),
attributed AS (
  SELECT * FROM whole_split
  UNION ALL
  SELECT * FROM whole_single
  UNION ALL
  SELECT * FROM value_rows
  WHERE NOT (base_bytes IS NOT NULL AND head_bytes IS NOT NULL
    AND base_bytes = head_bytes)
),
-- the (op_name, shape) of every value on each side: a one-sided value whose op
-- has values on the other side is one more copy, or a split or merge
base_ops AS (
  SELECT DISTINCT pair, op_name, shape FROM bv WHERE op_name IS NOT NULL
),
head_ops AS (
  SELECT DISTINCT pair, op_name, shape FROM hv WHERE op_name IS NOT NULL
),
described AS MATERIALIZED (
  SELECT
    a.*,
    b.op_name AS base_op, h.op_name AS head_op,
    b.shape AS base_shape, h.shape AS head_shape,
    b.instruction AS base_instruction, h.instruction AS head_instruction,
    coalesce(h.source, b.source) AS source,
    b.copy_of AS base_copy_of, h.copy_of AS head_copy_of,
    -- the sharding that changed: the parameter's own, the result's, else
    -- every one that changed in the pair
    CASE WHEN a.cause = 'sharding' THEN coalesce(
      (SELECT r.change FROM resharded AS r
        WHERE r.pair = a.pair
          AND r.parameter = coalesce(h.parameter, b.parameter)),
      CASE
        WHEN coalesce(h.category, b.category) = 'output'
          THEN rp.output_change
      END,
      rp.change) END AS sharding_change
  FROM attributed AS a
  LEFT JOIN bv AS b
    ON b.pair = a.pair AND b.value_id = a.base_value_id
  LEFT JOIN hv AS h
    ON h.pair = a.pair AND h.value_id = a.head_value_id
  LEFT JOIN repartitioned AS rp
    ON rp.pair = a.pair
),
head_only AS (
  SELECT
    d.pair, d.head_value_id,
    bool_or(o.shape = d.head_shape) AS same_shape,
    count(o.op_name) > 0 AS same_op
  FROM (
    SELECT DISTINCT pair, head_value_id, head_op, head_shape
    FROM described
    WHERE cause IS NULL AND base_bytes IS NULL
  ) AS d
  LEFT JOIN base_ops AS o
    ON o.pair = d.pair AND o.op_name = d.head_op
  GROUP BY d.pair, d.head_value_id
),
base_only AS (
  SELECT
    d.pair, d.base_value_id,
    bool_or(o.shape = d.base_shape) AS same_shape,
    count(o.op_name) > 0 AS same_op
  FROM (
    SELECT DISTINCT pair, base_value_id, base_op, base_shape
    FROM described
    WHERE cause IS NULL AND head_bytes IS NULL
  ) AS d
  LEFT JOIN head_ops AS o
    ON o.pair = d.pair AND o.op_name = d.base_op
  GROUP BY d.pair, d.base_value_id
),
-- the ops each side recomputes for its backward pass (jax names them under
-- rematted_computation/): a pair whose sets differ changed what it saves
recomputed_base AS (
  SELECT DISTINCT pair, op_name
  FROM bv
  WHERE contains(op_name, '/rematted_computation/')
),
recomputed_head AS (
  SELECT DISTINCT pair, op_name
  FROM hv
  WHERE contains(op_name, '/rematted_computation/')
),
remat_pairs AS (
  SELECT DISTINCT coalesce(b.pair, h.pair) AS pair
  FROM recomputed_base AS b
  FULL JOIN recomputed_head AS h
    ON h.pair = b.pair AND h.op_name = b.op_name
  WHERE b.op_name IS NULL OR h.op_name IS NULL
),
-- what is left unnamed has no partner: one more (fewer) copy of an op's
-- value of the same shape, a split or merge of an op's values, or new (gone)
unremat AS (
  SELECT
    d.* EXCLUDE (cause),
    CASE
      WHEN d.cause IS NOT NULL THEN d.cause
      WHEN d.base_bytes IS NULL THEN
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
  FROM described AS d
  LEFT JOIN head_only AS ho
    ON ho.pair = d.pair AND ho.head_value_id = d.head_value_id
      AND d.base_bytes IS NULL
  LEFT JOIN base_only AS bo
    ON bo.pair = d.pair AND bo.base_value_id = d.base_value_id
      AND d.head_bytes IS NULL
),
-- in a pair that changed what it recomputes, a value counted on one side
-- only (or liveness moved) of the forward pass (its op outside transpose(),
-- a residual saved for the backward pass) or of a recomputed op is remat;
-- a copy of an entry parameter on the side that aliases more of its outputs
-- to its parameters is the copy XLA keeps of a donated parameter: aliasing
classified AS (
  SELECT
    u.* EXCLUDE (cause, base_copy_of, head_copy_of),
    CASE
      WHEN u.cause = 'gone-buffer' AND u.base_copy_of IS NOT NULL
        AND f.base_alias > f.head_alias THEN 'aliasing-lost'
      WHEN u.cause = 'new-buffer' AND u.head_copy_of IS NOT NULL
        AND f.head_alias > f.base_alias THEN 'aliasing-gained'
      WHEN r.pair IS NOT NULL
        AND u.cause IN ('longer-live', 'shorter-live', 'fusion', 'new-buffer',
          'gone-buffer')
        AND (contains(coalesce(u.head_op, u.base_op), '/rematted_computation/')
          OR NOT contains(coalesce(u.head_op, u.base_op), 'transpose('))
        THEN 'remat'
      ELSE u.cause
    END AS cause
  FROM unremat AS u
  JOIN known AS f
    ON f.pair = u.pair AND f.measure = u.measure
  LEFT JOIN remat_pairs AS r
    ON r.pair = u.pair
),
-- one value of a shape more at the peak on one side and one fewer of that
-- shape on the other (a copy renamed, a loop's value renumbered; an update's
-- own allocation against the copy of the donated parameter it no longer
-- needs) is no change: rows of liveness, new and gone buffers, and rows of
-- aliasing, that net to zero per shape counted are left out (they sum to
-- zero, so the rows still sum exactly)
families AS (
  SELECT
    *,
    CASE
      WHEN cause IN ('longer-live', 'shorter-live', 'new-buffer',
        'gone-buffer') THEN 'presence'
      WHEN cause IN ('aliasing-lost', 'aliasing-gained') THEN 'aliasing'
    END AS family,
    -- a paired value whose shape changed counts as its pair of shapes (one
    -- more such pair at the peak and one fewer is no change), else as the
    -- shape it is counted at
    CASE
      WHEN base_value_id IS NOT NULL AND head_value_id IS NOT NULL
        AND cause IN ('longer-live', 'shorter-live')
        AND base_shape <> head_shape
        THEN base_shape || ' -> ' || head_shape
      WHEN delta > 0 THEN head_shape
      ELSE base_shape
    END AS counted
  FROM classified
  WHERE delta <> 0
),
presence AS (
  SELECT pair, measure, family, counted
  FROM families
  WHERE family IS NOT NULL
  GROUP BY ALL
  HAVING sum(delta) = 0
),
grouped AS (
  SELECT
    pair, measure, cause, matched_by,
    coalesce(head_op, base_op) AS op_name,
    source, base_shape, head_shape, sharding_change,
    CAST(sum(delta) AS BIGINT) AS bytes,
    count(*) AS buffers,
    min(base_instruction) AS base_instruction,
    min(head_instruction) AS head_instruction,
    CAST(sum(base_bytes) AS BIGINT) AS base_bytes,
    CAST(sum(head_bytes) AS BIGINT) AS head_bytes
  FROM families AS c
  WHERE NOT EXISTS (
    SELECT 1
    FROM presence AS p
    WHERE p.pair = c.pair AND p.measure = c.measure
      AND p.family = c.family AND p.counted = c.counted
  )
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
    base_bytes, head_bytes, sharding_change
  FROM grouped
  UNION ALL
  SELECT
    pair, measure, cause, bytes, 0,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM residual
  WHERE bytes <> 0
  UNION ALL
  SELECT
    pair, measure, 'no-peak', NULL, 0,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    base_figure, head_figure, NULL
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
  r.head_bytes,
  r.sharding_change
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
