-- name: recompiles
-- description: Jit names compiled into several modules within one run (one dump directory: one process), how often, and whether their peaks differ.
-- param min_modules INTEGER >= 1 = 2: Only names with at least this many modules.
-- param label VARCHAR = NULL: Only modules with this `key=value` label; NULL for all.
-- param helpers BOOLEAN = TRUE: Include jax's helper programs (the macro bh_is_helper); false leaves them out.
-- column directory: The dump directory the modules were read from (a process's --xla_dump_to; a profile's directory).
-- column module_name: Module name (jit name).
-- column modules: Modules with that name.
-- column distinct_contents: Distinct dump contents among them.
-- column module_numbers: Their module numbers, ascending.
-- column min_heap_peak_bytes: Smallest heap peak.
-- column max_heap_peak_bytes: Largest heap peak.
-- column peaks_differ: The heap peaks are not all equal.
-- note: A compile that arrived in several forms (text, .hlo.pb, a profile) counts once (the compile_modules view).
-- note: Counted within a dump directory: the same name dumped by separate processes or configurations (two directories) is not a recompile. label= narrows to one ingest's labels.
SELECT
  regexp_extract(paths[1], '^(.*)/', 1) AS directory,
  module_name,
  count(*) AS modules,
  count(DISTINCT content_hash) AS distinct_contents,
  list(module_number ORDER BY module_number) AS module_numbers,
  min(heap_peak_bytes) AS min_heap_peak_bytes,
  max(heap_peak_bytes) AS max_heap_peak_bytes,
  count(DISTINCT heap_peak_bytes) > 1 AS peaks_differ
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
GROUP BY directory, module_name
HAVING count(*) >= $min_modules
ORDER BY modules DESC, module_name, directory
