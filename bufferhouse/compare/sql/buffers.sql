-- name: diff-buffers
-- description: Buffers live at the heap peak of each module pair, base against head: matched by op_name and shape, then by defining instruction; new, gone, grown, shrunk or same.
-- column pair: Pair number (pairs.pair).
-- column module_name: Module name (jit name).
-- column status: new (head only), gone (base only), grown, shrunk or same (assigned size, base to head).
-- column matched_by: `op_name+shape`, `instruction` or `opcode+shape`; NULL for new and gone buffers.
-- column op_name: Framework op name (head's, else base's); NULL when the op has none.
-- column shape: Value shape without layout (head's, else base's).
-- column base_instruction: Defining instruction on the base side.
-- column head_instruction: Defining instruction on the head side.
-- column base_category: parameter, output, thread-local, constant or temp (base).
-- column head_category: parameter, output, thread-local, constant or temp (head).
-- column base_size: Assigned bytes on the base side (padded).
-- column head_size: Assigned bytes on the head side (padded).
-- column delta_bytes: head_size - base_size (a missing side counts as 0).
-- column source: source_file:source_line of the op (head's, else base's).
-- column base_value_id: Value id on the base side.
-- column head_value_id: Value id on the head side.
-- note: First pass: values with the same op_name (with JAX's `jit(main)/` scope removed, which releases before 0.7 wrote) and the same shape without layout pair up, largest with largest. Second pass, for the rest: values with the same defining instruction and ShapeIndex pair up unless their op_names differ. Third pass, for the rest without an op_name (most copies, constants, tuples): the same opcode and shape, largest with largest.
-- note: Runs on a scratch connection over Arrow tables `pairs`, `base_buffers` and `head_buffers` (the `peak-buffers` query of each module, plus its pair number).
WITH base AS (
  SELECT
    *,
    regexp_replace(op_name, '(^|/)jit\(main\)/', '\1', 'g') AS op_key,
    regexp_replace(shape, '\{[^}]*\}', '', 'g') AS bare_shape
  FROM base_buffers
),
head AS (
  SELECT
    *,
    regexp_replace(op_name, '(^|/)jit\(main\)/', '\1', 'g') AS op_key,
    regexp_replace(shape, '\{[^}]*\}', '', 'g') AS bare_shape
  FROM head_buffers
),
base_ranked AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, op_key, bare_shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM base
),
head_ranked AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, op_key, bare_shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM head
),
by_op AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'op_name+shape' AS matched_by
  FROM base_ranked AS b
  JOIN head_ranked AS h
    ON h.pair = b.pair
    AND h.op_key = b.op_key
    AND h.bare_shape = b.bare_shape
    AND h.k = b.k
),
base_left AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, instruction, shape_index
      ORDER BY size DESC, value_id
    ) AS k
  FROM base AS b
  WHERE NOT EXISTS (
    SELECT 1
    FROM by_op AS o
    WHERE o.pair = b.pair AND o.base_value_id = b.value_id
  )
),
head_left AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, instruction, shape_index
      ORDER BY size DESC, value_id
    ) AS k
  FROM head AS h
  WHERE NOT EXISTS (
    SELECT 1
    FROM by_op AS o
    WHERE o.pair = h.pair AND o.head_value_id = h.value_id
  )
),
by_instruction AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'instruction' AS matched_by
  FROM base_left AS b
  JOIN head_left AS h
    ON h.pair = b.pair
    AND h.instruction = b.instruction
    AND h.shape_index = b.shape_index
    AND h.k = b.k
  WHERE b.op_key IS NULL OR h.op_key IS NULL OR b.op_key = h.op_key
),
first_two AS (
  SELECT * FROM by_op
  UNION ALL
  SELECT * FROM by_instruction
),
base_unnamed AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, opcode, bare_shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM base AS b
  WHERE
    op_key IS NULL
    AND NOT EXISTS (
      SELECT 1
      FROM first_two AS o
      WHERE o.pair = b.pair AND o.base_value_id = b.value_id
    )
),
head_unnamed AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY pair, opcode, bare_shape
      ORDER BY size DESC, instruction, shape_index, value_id
    ) AS k
  FROM head AS h
  WHERE
    op_key IS NULL
    AND NOT EXISTS (
      SELECT 1
      FROM first_two AS o
      WHERE o.pair = h.pair AND o.head_value_id = h.value_id
    )
),
by_opcode AS (
  SELECT
    b.pair,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id,
    'opcode+shape' AS matched_by
  FROM base_unnamed AS b
  JOIN head_unnamed AS h
    ON h.pair = b.pair
    AND h.opcode = b.opcode
    AND h.bare_shape = b.bare_shape
    AND h.k = b.k
),
matched AS (
  SELECT * FROM first_two
  UNION ALL
  SELECT * FROM by_opcode
),
joined AS (
  SELECT
    coalesce(b.pair, h.pair) AS pair,
    m.matched_by,
    coalesce(h.op_name, b.op_name) AS op_name,
    coalesce(h.bare_shape, b.bare_shape) AS shape,
    b.instruction AS base_instruction,
    h.instruction AS head_instruction,
    b.category AS base_category,
    h.category AS head_category,
    b.size AS base_size,
    h.size AS head_size,
    coalesce(h.source, b.source) AS source,
    b.value_id AS base_value_id,
    h.value_id AS head_value_id
  FROM matched AS m
  JOIN base AS b
    ON b.pair = m.pair AND b.value_id = m.base_value_id
  JOIN head AS h
    ON h.pair = m.pair AND h.value_id = m.head_value_id
  UNION ALL
  SELECT
    b.pair,
    NULL,
    b.op_name,
    b.bare_shape,
    b.instruction,
    NULL,
    b.category,
    NULL,
    b.size,
    NULL,
    b.source,
    b.value_id,
    NULL
  FROM base AS b
  WHERE NOT EXISTS (
    SELECT 1
    FROM matched AS m
    WHERE m.pair = b.pair AND m.base_value_id = b.value_id
  )
  UNION ALL
  SELECT
    h.pair,
    NULL,
    h.op_name,
    h.bare_shape,
    NULL,
    h.instruction,
    NULL,
    h.category,
    NULL,
    h.size,
    h.source,
    NULL,
    h.value_id
  FROM head AS h
  WHERE NOT EXISTS (
    SELECT 1
    FROM matched AS m
    WHERE m.pair = h.pair AND m.head_value_id = h.value_id
  )
)
SELECT
  j.pair,
  p.module_name,
  CASE
    WHEN j.base_size IS NULL THEN 'new'
    WHEN j.head_size IS NULL THEN 'gone'
    WHEN j.head_size > j.base_size THEN 'grown'
    WHEN j.head_size < j.base_size THEN 'shrunk'
    ELSE 'same'
  END AS status,
  j.matched_by,
  j.op_name,
  j.shape,
  j.base_instruction,
  j.head_instruction,
  j.base_category,
  j.head_category,
  CAST(j.base_size AS BIGINT) AS base_size,
  CAST(j.head_size AS BIGINT) AS head_size,
  CAST(coalesce(j.head_size, 0) - coalesce(j.base_size, 0) AS BIGINT)
    AS delta_bytes,
  j.source,
  j.base_value_id,
  j.head_value_id
FROM joined AS j
JOIN pairs AS p
  ON p.pair = j.pair
ORDER BY
  abs(delta_bytes) DESC,
  j.pair,
  coalesce(j.head_size, j.base_size) DESC,
  j.op_name NULLS LAST,
  j.shape,
  coalesce(j.head_instruction, j.base_instruction)
