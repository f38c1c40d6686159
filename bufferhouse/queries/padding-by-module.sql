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
WITH chosen AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id, module_name
  FROM modules
  WHERE
    $module IS NULL
    OR bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
-- space_totals holds each module's and space's slice sums, computed at ingest
SELECT
  t.module_id,
  m.module_name,
  t.color,
  t.slices,
  t.slice_bytes AS assigned_bytes,
  t.slice_logical_bytes AS logical_bytes,
  t.slice_bytes - t.slice_logical_bytes AS padding_bytes,
  round(
    100.0 * (t.slice_bytes - t.slice_logical_bytes)
    / nullif(t.slice_bytes, 0),
    2
  ) AS padding_pct
FROM space_totals AS t
JOIN chosen AS m
  ON m.module_id = t.module_id
WHERE t.slices > 0
ORDER BY padding_bytes DESC, m.module_name, t.module_id, t.color
