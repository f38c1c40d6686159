-- name: top-modules
-- description: The largest modules across the fleet, ranked by the chosen peak.
-- param top INTEGER >= 0 = 20: How many modules.
-- param peak VARCHAR in (heap, logical, total, xla) = 'heap': Which figure to rank by: heap, logical, total or xla.
-- param label VARCHAR = NULL: Only modules with this `key=value` label; NULL for all.
-- param helpers BOOLEAN = TRUE: Include jax's helper programs (jit__normal, jit_convert_element_type ...: the macro bh_is_helper); false leaves them out.
-- column rank: 1 for the largest; NULL where the chosen figure is unknown (such modules are listed after the ranked ones, never ranked).
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column backend: cpu, gpu, tpu or unknown.
-- column peak_bytes: The figure ranked by.
-- column heap_peak_bytes: Heap peak of memory space 0.
-- column logical_peak_bytes: HloLiveRange peak.
-- column total_bytes: Total bytes used (sum of allocations).
-- note: A compile that arrived in several forms (text, .hlo.pb, a profile) is ranked once (the compile_modules view).
-- note: heap = indefinite allocations + max live temp bytes of memory space 0; logical = HloLiveRange's printed peak; total = `Total bytes used`, which is not a peak; xla = XLA's own peak_memory_in_bytes (modules.xla_peak_bytes; NULL, ranked last, where it cannot be computed).
-- example: bufferhouse query top-modules --param top=10 --param peak=logical
WITH ranked AS (
  SELECT
    module_id,
    module_name,
    backend,
    CASE $peak
      WHEN 'heap' THEN heap_peak_bytes
      WHEN 'logical' THEN logical_peak_bytes
      WHEN 'total' THEN total_bytes
      WHEN 'xla' THEN xla_peak_bytes
      ELSE error('peak must be heap, logical, total or xla')
    END AS peak_bytes,
    heap_peak_bytes,
    logical_peak_bytes,
    total_bytes
  FROM modules
  WHERE
    -- one compile, counted once, whichever forms carried it
    module_id IN (SELECT primary_module_id FROM compile_modules)
    AND ($helpers OR NOT bh_is_helper(module_name))
    AND (
      $label IS NULL
      OR module_id IN (
        SELECT primary_module_id FROM compile_labels WHERE key_value = $label
      )
    )
)
SELECT
  CASE
    WHEN peak_bytes IS NOT NULL
      THEN row_number() OVER (
        ORDER BY peak_bytes DESC NULLS LAST, module_name, module_id
      )
  END AS rank,
  module_id,
  module_name,
  backend,
  peak_bytes,
  heap_peak_bytes,
  logical_peak_bytes,
  total_bytes
FROM ranked
ORDER BY rank NULLS LAST, module_name, module_id
LIMIT $top
