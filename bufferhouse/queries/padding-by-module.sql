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
WITH slices AS (
  SELECT
    module_id,
    module_name,
    color,
    allocation_index,
    byte_offset,
    size,
    max(logical_bytes) AS logical_bytes
  FROM value_facts
  WHERE
    $module IS NULL
    OR module_id IN (SELECT module_id FROM module_keys WHERE key = $module)
  GROUP BY module_id, module_name, color, allocation_index, byte_offset, size
)
SELECT
  module_id,
  module_name,
  color,
  count(*) AS slices,
  CAST(sum(size) AS BIGINT) AS assigned_bytes,
  CAST(sum(logical_bytes) AS BIGINT) AS logical_bytes,
  CAST(sum(size) - sum(logical_bytes) AS BIGINT) AS padding_bytes,
  round(
    100.0 * (sum(size) - sum(logical_bytes)) / nullif(sum(size), 0), 2
  ) AS padding_pct
FROM slices
GROUP BY module_id, module_name, color
ORDER BY padding_bytes DESC, module_name, module_id, color
