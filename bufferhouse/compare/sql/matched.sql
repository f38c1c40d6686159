-- name: diff-matched
-- description: The values of each module pair, base against head, paired one to one by what survives a recompile; a value on one side only has NULL for the other.
-- column pair: Pair number (pairs.pair).
-- column matched_by: parameter, op_name+shape, instruction, op_name, source+shape, opcode+shape, opcode+dims or output+dims (see the note); NULL for a value on one side only.
-- column base_value_id: The value on the base side; NULL for a head-only value.
-- column head_value_id: The value on the head side; NULL for a base-only value.
-- note: Passes in the order parameter, op_name+shape, instruction (same shape), opcode+shape, instruction (shape changed), op_name, source+shape, opcode+dims, output+dims; each over the values the earlier ones left, largest with largest within a key (then values that count in total bytes first, then the lower value id: so a counted value pairs with a counted one where it can): `parameter`: the value of entry parameter N at ShapeIndex I (any shape); `op_name+shape`: the same op_name and shape without layout; `instruction`: the same defining instruction and ShapeIndex and opcode, unless their op_names differ, with the same shape, or the type changed and not the dimensions, or the dimensions changed (not merely permuted) and not the rank or type (a name reused for another value is no partner); `op_name`: the same op_name, opcode and ShapeIndex, any shape (a shape or dtype change); `source+shape`: the same source line and shape (an op renamed, e.g. by a JAX release); `opcode+shape`: values without an op_name, the same opcode and shape; `opcode+dims`: values without an op_name, the same opcode and dimensions, any element type (a copy of a parameter whose type changed); `output+dims`: values of output allocations with the same dimensions, any element type and op (a result whose op lost its name, e.g. a fused convert).
-- note: Runs on a scratch connection over Arrow tables `pairs`, and `base_values` / `head_values` (the diff-values rows of each side's modules).
-- note: Each key is compared as one 64-bit hash of its columns (a window or join over one integer is far cheaper than over strings); two keys colliding would be one key, a chance of about n²/2^64 for n values.
-- note: Each pass is written once, over the values of both sides (`is_base` tells them apart), and leaves the values it did not pair to the next; what the last leaves is on one side only.
WITH sides AS (
  SELECT true AS is_base, p.pair, v.*
  FROM base_values AS v
  JOIN pairs AS p
    ON p.base_module_id = v.module_id
  WHERE p.head_module_id IS NOT NULL
  UNION ALL
  SELECT false, p.pair, v.*
  FROM head_values AS v
  JOIN pairs AS p
    ON p.head_module_id = v.module_id
  WHERE p.base_module_id IS NOT NULL
),
vals AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    size,
    coalesce(total_member, false) AS member,
    op_name IS NOT NULL AS named,
    category = 'output' AND dims IS NOT NULL AS result,
    hash(parameter) AS parameter,
    parameter IS NOT NULL AS is_parameter,
    hash(op_name) AS op,
    hash(op_name, shape) AS op_shape,
    hash(instruction, shape_index) AS instruction,
    hash(op_name, opcode, shape_index) AS op_index,
    hash(opcode, shape) AS opcode_shape,
    source IS NOT NULL AS sourced,
    hash(source, shape) AS source_shape,
    hash(dims) AS dims,
    hash(shape) AS shape,
    hash(opcode, dims) AS opcode_dims,
    opcode,
    element_type,
    dims AS dim_list
  FROM sides
),
-- pass 1: entry parameters by number and ShapeIndex
m1r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    parameter AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, parameter
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM vals
  WHERE is_parameter
),
m1 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'parameter' AS matched_by
  FROM m1r AS b
  JOIN m1r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m1_left AS MATERIALIZED (
  SELECT *
  FROM vals AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m1
    UNION ALL
    SELECT pair, false, head_value_id FROM m1
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 2: op_name and shape
m2r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    op_shape AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, op_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM m1_left
  WHERE named
),
m2 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name+shape' AS matched_by
  FROM m2r AS b
  JOIN m2r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m2_left AS MATERIALIZED (
  SELECT *
  FROM m1_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m2
    UNION ALL
    SELECT pair, false, head_value_id FROM m2
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 3: the defining instruction, ShapeIndex, opcode and shape, unless
-- op_names differ
m3 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'instruction' AS matched_by
  FROM m2_left AS b
  JOIN m2_left AS h
    ON h.pair = b.pair AND h.instruction = b.instruction
  WHERE b.is_base AND NOT h.is_base
    AND (NOT b.named OR NOT h.named OR b.op = h.op)
    AND b.opcode IS NOT DISTINCT FROM h.opcode
    AND b.shape = h.shape
),
m3_left AS MATERIALIZED (
  SELECT *
  FROM m2_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m3
    UNION ALL
    SELECT pair, false, head_value_id FROM m3
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 4: values without an op_name, by opcode and shape
m4r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    opcode_shape AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, opcode_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM m3_left
  WHERE NOT named
),
m4 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'opcode+shape' AS matched_by
  FROM m4r AS b
  JOIN m4r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m4_left AS MATERIALIZED (
  SELECT *
  FROM m3_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m4
    UNION ALL
    SELECT pair, false, head_value_id FROM m4
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 5: the defining instruction and ShapeIndex, the shape changed: the
-- type with the dimensions kept, or dimensions with the rank and type kept,
-- not merely permuted (a name reused for another value, a copy of the
-- transposed array or a loop's carry renumbered, is no partner)
m5 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'instruction' AS matched_by
  FROM m4_left AS b
  JOIN m4_left AS h
    ON h.pair = b.pair AND h.instruction = b.instruction
  WHERE b.is_base AND NOT h.is_base
    AND (NOT b.named OR NOT h.named OR b.op = h.op)
    AND b.opcode IS NOT DISTINCT FROM h.opcode
    AND (
      -- a name reused for another value (a copy of another array, a loop's
      -- carry renumbered) is no partner: the type changed with the
      -- dimensions kept, or the dimensions with the rank and type kept (not
      -- merely permuted)
      b.dims = h.dims
      OR len(b.dim_list) = len(h.dim_list) AND b.element_type = h.element_type
        AND list_sort(b.dim_list) <> list_sort(h.dim_list)
      OR b.dim_list IS NULL AND h.dim_list IS NULL AND b.op_shape = h.op_shape
    )
),
m5_left AS MATERIALIZED (
  SELECT *
  FROM m4_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m5
    UNION ALL
    SELECT pair, false, head_value_id FROM m5
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 6: op_name, opcode and ShapeIndex, any shape
m6r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    op_index AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, op_index
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM m5_left
  WHERE named
),
m6 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name' AS matched_by
  FROM m6r AS b
  JOIN m6r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m6_left AS MATERIALIZED (
  SELECT *
  FROM m5_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m6
    UNION ALL
    SELECT pair, false, head_value_id FROM m6
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 7: the same source line and shape, the op renamed
m7r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    source_shape AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, source_shape
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM m6_left
  WHERE sourced
),
m7 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'source+shape' AS matched_by
  FROM m7r AS b
  JOIN m7r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m7_left AS MATERIALIZED (
  SELECT *
  FROM m6_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m7
    UNION ALL
    SELECT pair, false, head_value_id FROM m7
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 8: values without an op_name, by opcode and dimensions, any element
-- type (a copy of a parameter whose type changed)
m8r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    opcode_dims AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, opcode_dims
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM m7_left
  WHERE NOT named AND dim_list IS NOT NULL
),
m8 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'opcode+dims' AS matched_by
  FROM m8r AS b
  JOIN m8r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m8_left AS MATERIALIZED (
  SELECT *
  FROM m7_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m8
    UNION ALL
    SELECT pair, false, head_value_id FROM m8
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
-- pass 9: the entry's results by dimensions, whatever their ops became
m9r AS MATERIALIZED (
  SELECT
    is_base,
    pair,
    value_id,
    dims AS key,
    row_number() OVER (
      PARTITION BY is_base, pair, dims
      ORDER BY size DESC, member DESC, value_id
    ) AS k
  FROM m8_left
  WHERE result
),
m9 AS MATERIALIZED (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'output+dims' AS matched_by
  FROM m9r AS b
  JOIN m9r AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
  WHERE b.is_base AND NOT h.is_base
),
m9_left AS MATERIALIZED (
  SELECT *
  FROM m8_left AS x
  ANTI JOIN (
    SELECT pair, true AS is_base, base_value_id AS value_id FROM m9
    UNION ALL
    SELECT pair, false, head_value_id FROM m9
  ) AS t
    ON t.pair = x.pair AND t.is_base = x.is_base AND t.value_id = x.value_id
),
matched AS (
  SELECT * FROM m1
  UNION ALL
  SELECT * FROM m2
  UNION ALL
  SELECT * FROM m3
  UNION ALL
  SELECT * FROM m4
  UNION ALL
  SELECT * FROM m5
  UNION ALL
  SELECT * FROM m6
  UNION ALL
  SELECT * FROM m7
  UNION ALL
  SELECT * FROM m8
  UNION ALL
  SELECT * FROM m9
)
SELECT pair, matched_by, base_value_id, head_value_id
FROM matched
UNION ALL
SELECT pair, NULL, value_id, NULL
FROM m9_left
WHERE is_base
UNION ALL
SELECT pair, NULL, NULL, value_id
FROM m9_left
WHERE NOT is_base
