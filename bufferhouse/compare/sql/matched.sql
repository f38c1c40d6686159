-- name: diff-matched
-- description: The values of each module pair, base against head, paired one to one by what survives a recompile; a value on one side only has NULL for the other.
-- column pair: Pair number (pairs.pair).
-- column matched_by: parameter, op_name+shape, instruction, op_name, source+shape, opcode+shape, opcode+dims or output+dims (see the note); NULL for a value on one side only.
-- column base_value_id: The value on the base side; NULL for a head-only value.
-- column head_value_id: The value on the head side; NULL for a base-only value.
-- note: Passes in the order parameter, op_name+shape, instruction (same shape), opcode+shape, instruction (shape changed), op_name, source+shape, opcode+dims, output+dims; each over the values the earlier ones left, largest with largest within a key (then values that count in total bytes first, then the lower value id: so a counted value pairs with a counted one where it can): `parameter`: the value of entry parameter N at ShapeIndex I (any shape); `op_name+shape`: the same op_name and shape without layout; `instruction`: the same defining instruction and ShapeIndex and opcode, unless their op_names differ, with the same shape, or the type changed and not the dimensions, or the dimensions changed (not merely permuted) and not the rank or type (a name reused for another value is no partner); `op_name`: the same op_name, opcode and ShapeIndex, any shape (a shape or dtype change); `source+shape`: the same source line and shape (an op renamed, e.g. by a JAX release); `opcode+shape`: values without an op_name, the same opcode and shape; `opcode+dims`: values without an op_name, the same opcode and dimensions, any element type (a copy of a parameter whose type changed); `output+dims`: values of output allocations with the same dimensions, any element type and op (a result whose op lost its name, e.g. a fused convert).
-- note: Runs on a scratch connection over Arrow tables `pairs`, and `base_values` / `head_values` (the diff-values rows of each side's modules).
-- note: Each key is compared as one 64-bit hash of its columns (a window or join over one integer is far cheaper than over strings); two keys colliding would be one key, a chance of about n²/2^64 for n values.
WITH base AS MATERIALIZED (
  SELECT
    p.pair,
    v.value_id,
    v.size,
    coalesce(v.total_member, false) AS member,
    v.op_name IS NOT NULL AS named,
    v.category = 'output' AND v.dims IS NOT NULL AS result,
    hash(v.parameter) AS parameter,
    v.parameter IS NOT NULL AS is_parameter,
    hash(v.op_name) AS op,
    hash(v.op_name, v.shape) AS op_shape,
    hash(v.instruction, v.shape_index) AS instruction,
    hash(v.op_name, v.opcode, v.shape_index) AS op_index,
    hash(v.opcode, v.shape) AS opcode_shape,
    v.source IS NOT NULL AS sourced,
    hash(v.source, v.shape) AS source_shape,
    hash(v.dims) AS dims,
    hash(v.shape) AS shape,
    hash(v.opcode, v.dims) AS opcode_dims,
    v.opcode,
    v.element_type,
    v.dims AS dim_list
  FROM base_values AS v
  JOIN pairs AS p
    ON p.base_module_id = v.module_id
  WHERE p.head_module_id IS NOT NULL
),
head AS MATERIALIZED (
  SELECT
    p.pair,
    v.value_id,
    v.size,
    coalesce(v.total_member, false) AS member,
    v.op_name IS NOT NULL AS named,
    v.category = 'output' AND v.dims IS NOT NULL AS result,
    hash(v.parameter) AS parameter,
    v.parameter IS NOT NULL AS is_parameter,
    hash(v.op_name) AS op,
    hash(v.op_name, v.shape) AS op_shape,
    hash(v.instruction, v.shape_index) AS instruction,
    hash(v.op_name, v.opcode, v.shape_index) AS op_index,
    hash(v.opcode, v.shape) AS opcode_shape,
    v.source IS NOT NULL AS sourced,
    hash(v.source, v.shape) AS source_shape,
    hash(v.dims) AS dims,
    hash(v.shape) AS shape,
    hash(v.opcode, v.dims) AS opcode_dims,
    v.opcode,
    v.element_type,
    v.dims AS dim_list
  FROM head_values AS v
  JOIN pairs AS p
    ON p.head_module_id = v.module_id
  WHERE p.base_module_id IS NOT NULL
),
-- pass 1: entry parameters by number and ShapeIndex
b1 AS (
  SELECT
    pair,
    value_id,
    parameter AS key,
    row_number() OVER (
      PARTITION BY pair, parameter
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base
  WHERE is_parameter
),
h1 AS (
  SELECT
    pair,
    value_id,
    parameter AS key,
    row_number() OVER (
      PARTITION BY pair, parameter
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head
  WHERE is_parameter
),
m1 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'parameter' AS matched_by
  FROM b1 AS b
  JOIN h1 AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base1 AS MATERIALIZED (
  SELECT *
  FROM base AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m1 WHERE m1.pair = x.pair AND m1.base_value_id = x.value_id
  )
),
head1 AS MATERIALIZED (
  SELECT *
  FROM head AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m1 WHERE m1.pair = x.pair AND m1.head_value_id = x.value_id
  )
),
-- pass 2: op_name and shape
b2 AS (
  SELECT
    pair,
    value_id,
    op_shape AS key,
    row_number() OVER (
      PARTITION BY pair, op_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base1
  WHERE named
),
h2 AS (
  SELECT
    pair,
    value_id,
    op_shape AS key,
    row_number() OVER (
      PARTITION BY pair, op_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head1
  WHERE named
),
m2 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name+shape' AS matched_by
  FROM b2 AS b
  JOIN h2 AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base2 AS MATERIALIZED (
  SELECT *
  FROM base1 AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m2 WHERE m2.pair = x.pair AND m2.base_value_id = x.value_id
  )
),
head2 AS MATERIALIZED (
  SELECT *
  FROM head1 AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m2 WHERE m2.pair = x.pair AND m2.head_value_id = x.value_id
  )
),
-- pass 3: the defining instruction, ShapeIndex, opcode and shape, unless
-- op_names differ
m3 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'instruction' AS matched_by
  FROM base2 AS b
  JOIN head2 AS h
    ON h.pair = b.pair AND h.instruction = b.instruction
  WHERE (NOT b.named OR NOT h.named OR b.op = h.op)
    AND b.opcode IS NOT DISTINCT FROM h.opcode
    AND b.shape = h.shape
),
base3 AS MATERIALIZED (
  SELECT *
  FROM base2 AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m3 WHERE m3.pair = x.pair AND m3.base_value_id = x.value_id
  )
),
head3 AS MATERIALIZED (
  SELECT *
  FROM head2 AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m3 WHERE m3.pair = x.pair AND m3.head_value_id = x.value_id
  )
),
-- pass 5: values without an op_name, by opcode and shape
b5 AS (
  SELECT
    pair,
    value_id,
    opcode_shape AS key,
    row_number() OVER (
      PARTITION BY pair, opcode_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base3
  WHERE NOT named
),
h5 AS (
  SELECT
    pair,
    value_id,
    opcode_shape AS key,
    row_number() OVER (
      PARTITION BY pair, opcode_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head3
  WHERE NOT named
),
m5 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'opcode+shape' AS matched_by
  FROM b5 AS b
  JOIN h5 AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base5 AS MATERIALIZED (
  SELECT *
  FROM base3 AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m5 WHERE m5.pair = x.pair AND m5.base_value_id = x.value_id
  )
),
head5 AS MATERIALIZED (
  SELECT *
  FROM head3 AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m5 WHERE m5.pair = x.pair AND m5.head_value_id = x.value_id
  )
),
-- pass 3b: the defining instruction and ShapeIndex, the shape changed: the
-- type with the dimensions kept, or dimensions with the rank and type kept,
-- not merely permuted (a name reused for another value, a copy of the
-- transposed array or a loop's carry renumbered, is no partner)
m3b AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'instruction' AS matched_by
  FROM base5 AS b
  JOIN head5 AS h
    ON h.pair = b.pair AND h.instruction = b.instruction
  WHERE (NOT b.named OR NOT h.named OR b.op = h.op)
    AND b.opcode IS NOT DISTINCT FROM h.opcode
    -- a name reused for another value (a copy of another array, a loop's
    -- carry renumbered) is no partner: the type changed with the dimensions
    -- kept, or the dimensions with the rank and type kept (not permuted)
    AND (
      b.dims = h.dims
      OR len(b.dim_list) = len(h.dim_list) AND b.element_type = h.element_type
        AND list_sort(b.dim_list) <> list_sort(h.dim_list)
      OR b.dim_list IS NULL AND h.dim_list IS NULL AND b.op_shape = h.op_shape
    )
),
base3b AS MATERIALIZED (
  SELECT *
  FROM base5 AS x
  WHERE NOT EXISTS (
    SELECT 1
    FROM m3b
    WHERE m3b.pair = x.pair AND m3b.base_value_id = x.value_id
  )
),
head3b AS MATERIALIZED (
  SELECT *
  FROM head5 AS x
  WHERE NOT EXISTS (
    SELECT 1
    FROM m3b
    WHERE m3b.pair = x.pair AND m3b.head_value_id = x.value_id
  )
),
-- pass 4: op_name, opcode and ShapeIndex, any shape
b4 AS (
  SELECT
    pair,
    value_id,
    op_index AS key,
    row_number() OVER (
      PARTITION BY pair, op_index
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base3b
  WHERE named
),
h4 AS (
  SELECT
    pair,
    value_id,
    op_index AS key,
    row_number() OVER (
      PARTITION BY pair, op_index
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head3b
  WHERE named
),
m4 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name' AS matched_by
  FROM b4 AS b
  JOIN h4 AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base4 AS MATERIALIZED (
  SELECT *
  FROM base3b AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m4 WHERE m4.pair = x.pair AND m4.base_value_id = x.value_id
  )
),
head4 AS MATERIALIZED (
  SELECT *
  FROM head3b AS x
  WHERE NOT EXISTS (
    SELECT 1 FROM m4 WHERE m4.pair = x.pair AND m4.head_value_id = x.value_id
  )
),
-- pass 4s: the same source line and shape, the op renamed
b4s AS (
  SELECT
    pair,
    value_id,
    source_shape AS key,
    row_number() OVER (
      PARTITION BY pair, source_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base4
  WHERE sourced
),
h4s AS (
  SELECT
    pair,
    value_id,
    source_shape AS key,
    row_number() OVER (
      PARTITION BY pair, source_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head4
  WHERE sourced
),
m4s AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'source+shape' AS matched_by
  FROM b4s AS b
  JOIN h4s AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base4s AS MATERIALIZED (
  SELECT *
  FROM base4 AS x
  WHERE NOT EXISTS (
    SELECT 1
    FROM m4s
    WHERE m4s.pair = x.pair AND m4s.base_value_id = x.value_id
  )
),
head4s AS MATERIALIZED (
  SELECT *
  FROM head4 AS x
  WHERE NOT EXISTS (
    SELECT 1
    FROM m4s
    WHERE m4s.pair = x.pair AND m4s.head_value_id = x.value_id
  )
),
-- pass 5t: values without an op_name, by opcode and dimensions, any element
-- type (a copy of a parameter whose type changed)
b5t AS (
  SELECT
    pair,
    value_id,
    opcode_dims AS key,
    row_number() OVER (
      PARTITION BY pair, opcode_dims
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base4s
  WHERE NOT named AND dim_list IS NOT NULL
),
h5t AS (
  SELECT
    pair,
    value_id,
    opcode_dims AS key,
    row_number() OVER (
      PARTITION BY pair, opcode_dims
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head4s
  WHERE NOT named AND dim_list IS NOT NULL
),
m5t AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'opcode+dims' AS matched_by
  FROM b5t AS b
  JOIN h5t AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base5t AS MATERIALIZED (
  SELECT *
  FROM base4s AS x
  WHERE NOT EXISTS (
    SELECT 1
    FROM m5t
    WHERE m5t.pair = x.pair AND m5t.base_value_id = x.value_id
  )
),
head5t AS MATERIALIZED (
  SELECT *
  FROM head4s AS x
  WHERE NOT EXISTS (
    SELECT 1
    FROM m5t
    WHERE m5t.pair = x.pair AND m5t.head_value_id = x.value_id
  )
),
-- pass 6: the entry's results by dimensions, whatever their ops became
b6 AS (
  SELECT
    pair,
    value_id,
    dims AS key,
    row_number() OVER (
      PARTITION BY pair, dims
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM base5t
  WHERE result
),
h6 AS (
  SELECT
    pair,
    value_id,
    dims AS key,
    row_number() OVER (
      PARTITION BY pair, dims
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM head5t
  WHERE result
),
m6 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'output+dims' AS matched_by
  FROM b6 AS b
  JOIN h6 AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
matched AS (
  SELECT * FROM m1
  UNION ALL
  SELECT * FROM m2
  UNION ALL
  SELECT * FROM m3
  UNION ALL
  SELECT * FROM m3b
  UNION ALL
  SELECT * FROM m4
  UNION ALL
  SELECT * FROM m4s
  UNION ALL
  SELECT * FROM m5
  UNION ALL
  SELECT * FROM m5t
  UNION ALL
  SELECT * FROM m6
)
SELECT pair, matched_by, base_value_id, head_value_id
FROM matched
UNION ALL
SELECT b.pair, NULL, b.value_id, NULL
FROM base AS b
WHERE NOT EXISTS (
  SELECT 1
  FROM matched AS m
  WHERE m.pair = b.pair AND m.base_value_id = b.value_id
)
UNION ALL
SELECT h.pair, NULL, NULL, h.value_id
FROM head AS h
WHERE NOT EXISTS (
  SELECT 1
  FROM matched AS m
  WHERE m.pair = h.pair AND m.head_value_id = h.value_id
)
