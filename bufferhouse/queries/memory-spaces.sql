-- name: memory-spaces
-- description: Bytes per memory space (color), per module and fleet-wide, with the space's name for the module's backend.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- column scope: `module` for a module's row, `fleet` for the total over the selected modules.
-- column module_id: Module identity; NULL on fleet rows.
-- column module_name: Module name; NULL on fleet rows.
-- column backend: cpu, gpu, tpu or unknown.
-- column color: Memory space number.
-- column space_name: Name from the memory_spaces reference table (color_N if unknown).
-- column modules: Modules in the row (1 on module rows).
-- column total_bytes: Sum of allocation sizes in the space.
-- column indefinite_bytes: Parameter, output, constant and thread-local allocations.
-- column temp_allocation_bytes: preallocated-temp allocations.
-- column heap_peak_bytes: Heap peak of the space; on fleet rows the largest module's.
-- note: Colors are backend-specific numbers; names come from memory_spaces (TPU names as in XProf's memory viewer).
WITH chosen AS (
  -- the module selector: see docs/query-planning.md
  SELECT
    h.module_id,
    m.module_name,
    m.backend,
    h.color,
    h.total_bytes,
    h.indefinite_bytes,
    h.temp_allocation_bytes,
    h.heap_peak_bytes
  FROM heap_peaks AS h
  JOIN modules AS m
    ON m.module_id = h.module_id
  WHERE
    $module IS NULL
    OR bh_is_module(
      $module,
      m.module_name, m.file_stem, m.module_id, m.content_hash
    )
),
named AS (
  SELECT
    c.*,
    coalesce(s.name, u.name, 'color_' || CAST(c.color AS VARCHAR))
      AS space_name
  FROM chosen AS c
  LEFT JOIN memory_spaces AS s
    ON s.backend = c.backend AND s.color = c.color
  LEFT JOIN memory_spaces AS u
    ON u.backend = 'unknown' AND u.color = c.color
)
SELECT
  'module' AS scope,
  module_id,
  module_name,
  backend,
  color,
  space_name,
  1 AS modules,
  total_bytes,
  indefinite_bytes,
  temp_allocation_bytes,
  heap_peak_bytes
FROM named
UNION ALL
SELECT
  'fleet' AS scope,
  NULL AS module_id,
  NULL AS module_name,
  backend,
  color,
  space_name,
  count(*) AS modules,
  CAST(sum(total_bytes) AS BIGINT) AS total_bytes,
  CAST(sum(indefinite_bytes) AS BIGINT) AS indefinite_bytes,
  CAST(sum(temp_allocation_bytes) AS BIGINT)
    AS temp_allocation_bytes,
  max(heap_peak_bytes) AS heap_peak_bytes
FROM named
GROUP BY backend, color, space_name
ORDER BY scope DESC, module_name NULLS FIRST, module_id, backend, color
