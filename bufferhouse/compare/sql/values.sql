-- name: diff-values
-- description: Every placed value of the given modules, with what survives a recompile (op_name, source line, opcode, parameter number, shape) and whether it counts toward the module's total bytes, for the causes of a diff.
-- param ids BIGINT[] = NULL: The modules (modules.module_id).
-- column module_id: Module.
-- column value_id: Value id.
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column shape: Value shape without layout, e.g. f32[64,128].
-- column element_type: Element type; NULL for tuples.
-- column dims: Dimensions; NULL for tuples.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name with JAX's `jit(main)/` scope removed (releases before 0.7 wrote it); NULL when the op has none.
-- column source: source_file:source_line of the op, NULL if unknown.
-- column parameter: `N{index}` for the value a parameter instruction defines in entry parameter N's allocation, else NULL.
-- column allocation_index: Allocation holding the value.
-- column category: The allocation's kind: parameter, output, thread-local, constant or temp.
-- column size: Assigned bytes of the value's slice (padded).
-- column total_member: The value stands for its allocation in total bytes: the largest value (lowest value_id on a tie) of an allocation other than temp; of a temp allocation, each value the heap_peak_buffers rows list in it, or, when none, its largest.
-- column copy_of: For a copy of an entry parameter's value, that parameter (`N{index}`, as parameter); else NULL.
-- note: total_bytes is the sum of allocation sizes; the members' sizes fall short of it by what packing leaves unused (in a temp allocation) and by values the rule does not list; the causes call that difference fragmentation.
WITH v AS (
  SELECT
    module_id, value_id, instruction, shape_index, shape, element_type, dims
  FROM hlo_values
  WHERE module_id IN (SELECT unnest($ids))
),
a AS (
  SELECT module_id, value_id, allocation_index, size
  FROM assignments
  WHERE module_id IN (SELECT unnest($ids))
),
al AS (
  SELECT
    module_id, allocation_index, category, is_parameter, parameter_number,
    parameter_shape_index
  FROM allocations
  WHERE module_id IN (SELECT unnest($ids))
),
i AS (
  SELECT
    module_id, instruction, opcode, op_name, source_file, source_line,
    CASE WHEN opcode = 'copy' THEN operands[1] END AS copied
  FROM instructions
  WHERE module_id IN (SELECT unnest($ids))
),
peak AS (
  SELECT DISTINCT module_id, allocation_index, value_id
  FROM heap_peak_buffers
  WHERE module_id IN (SELECT unnest($ids)) AND category = 'temp'
),
-- per allocation: its largest size, then the lowest value id of that size,
-- and how many of its values heap_peak_buffers lists (aggregates, not
-- windows: a window sorts every allocation's values)
largest AS (
  SELECT module_id, allocation_index, max(size) AS size
  FROM a
  GROUP BY module_id, allocation_index
),
rep AS (
  SELECT a.module_id, a.allocation_index, min(a.value_id) AS value_id
  FROM a
  JOIN largest AS l
    ON l.module_id = a.module_id
    AND l.allocation_index = a.allocation_index
    AND l.size = a.size
  GROUP BY a.module_id, a.allocation_index
),
listed AS (
  SELECT module_id, allocation_index, count(*) AS peak_count
  FROM peak
  GROUP BY module_id, allocation_index
),
placed AS (
  SELECT
    a.module_id, a.value_id, a.allocation_index, a.size, al.category,
    CASE
      WHEN al.is_parameter
        THEN CAST(al.parameter_number AS VARCHAR)
          || coalesce(al.parameter_shape_index, '{}')
    END AS parameter,
    r.value_id IS NOT NULL AS largest,
    p.value_id IS NOT NULL AS at_peak,
    coalesce(n.peak_count, 0) AS peak_count
  FROM a
  JOIN al
    ON al.module_id = a.module_id AND al.allocation_index = a.allocation_index
  LEFT JOIN rep AS r
    ON r.module_id = a.module_id
    AND r.allocation_index = a.allocation_index
    AND r.value_id = a.value_id
  LEFT JOIN listed AS n
    ON n.module_id = a.module_id AND n.allocation_index = a.allocation_index
  LEFT JOIN peak AS p
    ON p.module_id = a.module_id
    AND p.allocation_index = a.allocation_index
    AND p.value_id = a.value_id
),
-- the entry parameter each parameter instruction's value sits in: a copy of
-- it is what XLA keeps of a donated parameter still read after its update
params AS (
  SELECT p.module_id, v.instruction, min(p.parameter) AS parameter
  FROM placed AS p
  JOIN v
    ON v.module_id = p.module_id AND v.value_id = p.value_id
  JOIN i
    ON i.module_id = v.module_id AND i.instruction = v.instruction
  WHERE p.parameter IS NOT NULL AND i.opcode = 'parameter'
  GROUP BY p.module_id, v.instruction
)
SELECT
  v.module_id,
  v.value_id,
  v.instruction,
  v.shape_index,
  regexp_replace(v.shape, '\{[^}]*\}', '', 'g') AS shape,
  v.element_type,
  v.dims,
  i.opcode,
  -- jit(main)/ dropped where a scope starts (plain replaces: a regex per
  -- value costs more than the rest of the row)
  CASE
    WHEN starts_with(i.op_name, 'jit(main)/')
      THEN replace(i.op_name[11:], '/jit(main)/', '/')
    ELSE replace(i.op_name, '/jit(main)/', '/')
  END AS op_name,
  i.source_file || ':' || CAST(i.source_line AS VARCHAR) AS source,
  CASE WHEN i.opcode = 'parameter' THEN p.parameter END AS parameter,
  p.allocation_index,
  p.category,
  p.size,
  CASE
    WHEN p.category <> 'temp' OR p.peak_count = 0 THEN p.largest
    ELSE p.at_peak
  END AS total_member,
  cp.parameter AS copy_of
FROM placed AS p
JOIN v
  ON v.module_id = p.module_id AND v.value_id = p.value_id
LEFT JOIN i
  ON i.module_id = v.module_id AND i.instruction = v.instruction
LEFT JOIN params AS cp
  ON cp.module_id = i.module_id AND cp.instruction = i.copied
