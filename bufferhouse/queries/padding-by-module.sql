-- name: padding-by-module
-- description: Padding rolled up per module and memory space: assigned bytes of distinct slices against their logical bytes.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column color: Memory space.
-- column slices: Distinct (allocation, offset, size) slices holding values.
-- column assigned_bytes: Sum of slice sizes.
-- column logical_bytes: Sum over slices of the largest logical size of the values in the slice.
-- column padding_bytes: assigned_bytes - logical_bytes.
-- column padding_pct: padding_bytes as a percentage of assigned_bytes.
-- note: Aliased values share a slice and count once. A slice reused over time by values of different shapes counts once, with its largest logical size.
WITH wanted AS (
  SELECT module_id FROM module_keys WHERE key = $module
),
-- each large table is read scoped to the module: see queries/__init__.py
scoped AS (
  SELECT module_id, value_id, allocation_index, byte_offset, size
  FROM assignments
  WHERE $module IS NULL
  UNION ALL
  SELECT module_id, value_id, allocation_index, byte_offset, size
  FROM assignments
  WHERE module_id IN (SELECT module_id FROM wanted)
),
sized AS (
  SELECT module_id, value_id, logical_bytes
  FROM hlo_values
  WHERE $module IS NULL
  UNION ALL
  SELECT module_id, value_id, logical_bytes
  FROM hlo_values
  WHERE module_id IN (SELECT module_id FROM wanted)
),
allocs AS (
  SELECT module_id, allocation_index, color
  FROM allocations
  WHERE $module IS NULL
  UNION ALL
  SELECT module_id, allocation_index, color
  FROM allocations
  WHERE module_id IN (SELECT module_id FROM wanted)
),
slices AS (
  SELECT
    a.module_id,
    al.color,
    a.allocation_index,
    a.byte_offset,
    a.size,
    max(v.logical_bytes) AS logical_bytes
  FROM scoped AS a
  JOIN sized AS v
    ON v.module_id = a.module_id AND v.value_id = a.value_id
  JOIN allocs AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
  GROUP BY a.module_id, al.color, a.allocation_index, a.byte_offset, a.size
),
totals AS (
  SELECT
    module_id,
    color,
    count(*) AS slices,
    sum(size) AS assigned,
    sum(logical_bytes) AS logical
  FROM slices
  GROUP BY module_id, color
)
SELECT
  t.module_id,
  m.module_name,
  t.color,
  t.slices,
  CAST(t.assigned AS BIGINT) AS assigned_bytes,
  CAST(t.logical AS BIGINT) AS logical_bytes,
  CAST(t.assigned - t.logical AS BIGINT) AS padding_bytes,
  round(100.0 * (t.assigned - t.logical) / nullif(t.assigned, 0), 2)
    AS padding_pct
FROM totals AS t
JOIN modules AS m
  ON m.module_id = t.module_id
ORDER BY padding_bytes DESC, m.module_name, t.module_id, t.color
