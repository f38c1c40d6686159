-- name: diff-matched
-- description: The values of each module pair, base against head, paired one to one by what survives a recompile; a value on one side only has NULL for the other.
-- column pair: Pair number (pairs.pair).
-- column matched_by: parameter, op_name+shape, instruction, op_name, opcode+shape or output+dims (see the note); NULL for a value on one side only.
-- column base_value_id: The value on the base side; NULL for a head-only value.
-- column head_value_id: The value on the head side; NULL for a base-only value.
-- note: Passes, each over the values the earlier ones left, largest with largest within a key (then by instruction, ShapeIndex, value id): `parameter`: the value of entry parameter N at ShapeIndex I (any shape); `op_name+shape`: the same op_name and shape without layout; `instruction`: the same defining instruction and ShapeIndex, unless their op_names differ; `op_name`: the same op_name, opcode and ShapeIndex, any shape (a shape or dtype change); `opcode+shape`: values without an op_name, the same opcode and shape; `output+dims`: values of output allocations with the same dimensions, any element type and op (a result whose op lost its name, e.g. a fused convert).
-- note: Runs on a scratch connection over Arrow tables `pairs`, and `base_values` / `head_values` (the diff-values rows of each side's modules).
WITH base AS (
  SELECT p.pair, v.*
  FROM base_values AS v
  JOIN pairs AS p
    ON p.base_module_id = v.module_id
  WHERE p.head_module_id IS NOT NULL
),
head AS (
  SELECT p.pair, v.*
  FROM head_values AS v
  JOIN pairs AS p
    ON p.head_module_id = v.module_id
  WHERE p.base_module_id IS NOT NULL
),
-- pass 1: entry parameters by number and ShapeIndex
b1 AS (
  SELECT
    pair, value_id, parameter AS key,
    row_number() OVER (PARTITION BY pair, parameter ORDER BY value_id) AS k
  FROM base
  WHERE parameter IS NOT NULL
),
h1 AS (
  SELECT
    pair, value_id, parameter AS key,
    row_number() OVER (PARTITION BY pair, parameter ORDER BY value_id) AS k
  FROM head
  WHERE parameter IS NOT NULL
),
m1 AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'parameter' AS matched_by
  FROM b1 AS b
  JOIN h1 AS h
    ON h.pair = b.pair AND h.key = b.key AND h.k = b.k
),
base1 AS (
  SELECT * FROM base AS b
  WHERE NOT EXISTS (
    SELECT 1 FROM m1 WHERE m1.pair = b.pair AND m1.base_value_id = b.value_id
  )
),
head1 AS (
  SELECT * FROM head AS h
  WHERE NOT EXISTS (
    SELECT 1 FROM m1 WHERE m1.pair = h.pair AND m1.head_value_id = h.value_id
  )
),
-- pass 2: op_name and shape
b2 AS (
  SELECT
    pair, value_id, op_name, shape,
    row_number() OVER (
      PARTITION BY pair, op_name, shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM base1
  WHERE op_name IS NOT NULL
),
h2 AS (
  SELECT
    pair, value_id, op_name, shape,
    row_number() OVER (
      PARTITION BY pair, op_name, shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM head1
  WHERE op_name IS NOT NULL
),
m2 AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name+shape' AS matched_by
  FROM b2 AS b
  JOIN h2 AS h
    ON h.pair = b.pair
    AND h.op_name = b.op_name
    AND h.shape = b.shape
    AND h.k = b.k
),
base2 AS (
  SELECT * FROM base1 AS b
  WHERE NOT EXISTS (
    SELECT 1 FROM m2 WHERE m2.pair = b.pair AND m2.base_value_id = b.value_id
  )
),
head2 AS (
  SELECT * FROM head1 AS h
  WHERE NOT EXISTS (
    SELECT 1 FROM m2 WHERE m2.pair = h.pair AND m2.head_value_id = h.value_id
  )
),
-- pass 3: the defining instruction and ShapeIndex, unless op_names differ
m3 AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'instruction' AS matched_by
  FROM base2 AS b
  JOIN head2 AS h
    ON h.pair = b.pair
    AND h.instruction = b.instruction
    AND h.shape_index = b.shape_index
  WHERE b.op_name IS NULL OR h.op_name IS NULL OR b.op_name = h.op_name
),
base3 AS (
  SELECT * FROM base2 AS b
  WHERE NOT EXISTS (
    SELECT 1 FROM m3 WHERE m3.pair = b.pair AND m3.base_value_id = b.value_id
  )
),
head3 AS (
  SELECT * FROM head2 AS h
  WHERE NOT EXISTS (
    SELECT 1 FROM m3 WHERE m3.pair = h.pair AND m3.head_value_id = h.value_id
  )
),
-- pass 4: op_name, opcode and ShapeIndex, any shape
b4 AS (
  SELECT
    pair, value_id, op_name, opcode, shape_index,
    row_number() OVER (
      PARTITION BY pair, op_name, opcode, shape_index
      ORDER BY size DESC, instruction, value_id
    ) AS k
  FROM base3
  WHERE op_name IS NOT NULL
),
h4 AS (
  SELECT
    pair, value_id, op_name, opcode, shape_index,
    row_number() OVER (
      PARTITION BY pair, op_name, opcode, shape_index
      ORDER BY size DESC, instruction, value_id
    ) AS k
  FROM head3
  WHERE op_name IS NOT NULL
),
m4 AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name' AS matched_by
  FROM b4 AS b
  JOIN h4 AS h
    ON h.pair = b.pair
    AND h.op_name = b.op_name
    AND h.opcode IS NOT DISTINCT FROM b.opcode
    AND h.shape_index = b.shape_index
    AND h.k = b.k
),
base4 AS (
  SELECT * FROM base3 AS b
  WHERE NOT EXISTS (
    SELECT 1 FROM m4 WHERE m4.pair = b.pair AND m4.base_value_id = b.value_id
  )
),
head4 AS (
  SELECT * FROM head3 AS h
  WHERE NOT EXISTS (
    SELECT 1 FROM m4 WHERE m4.pair = h.pair AND m4.head_value_id = h.value_id
  )
),
-- pass 5: values without an op_name, by opcode and shape
b5 AS (
  SELECT
    pair, value_id, opcode, shape,
    row_number() OVER (
      PARTITION BY pair, opcode, shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM base4
  WHERE op_name IS NULL
),
h5 AS (
  SELECT
    pair, value_id, opcode, shape,
    row_number() OVER (
      PARTITION BY pair, opcode, shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM head4
  WHERE op_name IS NULL
),
m5 AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'opcode+shape' AS matched_by
  FROM b5 AS b
  JOIN h5 AS h
    ON h.pair = b.pair
    AND h.opcode IS NOT DISTINCT FROM b.opcode
    AND h.shape IS NOT DISTINCT FROM b.shape
    AND h.k = b.k
),
base5 AS (
  SELECT * FROM base4 AS b
  WHERE NOT EXISTS (
    SELECT 1 FROM m5 WHERE m5.pair = b.pair AND m5.base_value_id = b.value_id
  )
),
head5 AS (
  SELECT * FROM head4 AS h
  WHERE NOT EXISTS (
    SELECT 1 FROM m5 WHERE m5.pair = h.pair AND m5.head_value_id = h.value_id
  )
),
-- pass 6: the entry's results by role, whatever their ops became
b6 AS (
  SELECT
    pair, value_id, dims,
    row_number() OVER (
      PARTITION BY pair, dims
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM base5
  WHERE category = 'output' AND dims IS NOT NULL
),
h6 AS (
  SELECT
    pair, value_id, dims,
    row_number() OVER (
      PARTITION BY pair, dims
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM head5
  WHERE category = 'output' AND dims IS NOT NULL
),
m6 AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'output+dims' AS matched_by
  FROM b6 AS b
  JOIN h6 AS h
    ON h.pair = b.pair AND h.dims = b.dims AND h.k = b.k
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
