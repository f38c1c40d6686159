-- name: fragmentation
-- description: Per temp allocation: its size, the most bytes in use at once, and the waste between them.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- param top INTEGER >= 0 = 100: How many allocations, most waste first; NULL for all.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column allocation_index: The preallocated-temp allocation.
-- column color: Memory space.
-- column size: Allocation size.
-- column max_live_bytes: Most bytes in use at once (union of byte ranges of values live at a step).
-- column waste_bytes: size - max_live_bytes: XLA's heap-simulator fragmentation of the arena.
-- column waste_pct: waste_bytes as a percentage of size.
-- note: Matches XLA's `fragmentation_size = heap_size - no_fragmentation_heap_size` per arena, computed from offsets, sizes and live ranges. NULL when the module has no live ranges.
WITH chosen AS (
  -- the module selector (see docs/query-planning.md), and one integer sort key
  -- for (module_name, module_id)
  SELECT
    module_id,
    module_name,
    row_number() OVER (ORDER BY module_name, module_id) AS module_rank
  FROM modules
  WHERE
    $module IS NULL
    OR bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
SELECT
  a.module_id,
  m.module_name,
  a.allocation_index,
  a.color,
  a.size,
  a.max_live_bytes,
  a.size - a.max_live_bytes AS waste_bytes,
  round(
    CAST(100 AS DOUBLE) * (a.size - a.max_live_bytes) / nullif(a.size, 0),
    2
  ) AS waste_pct
FROM allocations AS a
JOIN chosen AS m
  ON m.module_id = a.module_id
WHERE a.is_preallocated_temp
ORDER BY waste_bytes DESC NULLS LAST, m.module_rank, a.allocation_index
LIMIT $top
