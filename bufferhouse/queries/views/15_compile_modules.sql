-- name: compile_modules
-- description: Every module with the module that stands for its compile: one compile seen as a text dump, an .hlo.pb and in a profile is three modules (each keeps its own rows and source) but one compile, counted once.
-- column module_id: Module (modules.module_id).
-- column compile_key: What names the compile: modules.assignment_fingerprint (equal across forms) and the copy's rank among the modules of its form with that fingerprint; else the content hash.
-- column primary_module_id: The module that stands for the compile: the one read from the most forms (text+proto, then text, then proto, then a profile), then the lowest content hash.
-- note: Only modules of different forms are one compile: two text dumps with the same buffer assignment (the same program compiled by two jax releases, or in two jobs) stay two; the n-th of each form's copies (by content hash) are linked. Queries that count compiles (top-modules, recompiles, diff) keep the primary modules; a label selects a compile when any of its modules carries it.
WITH copies AS (
  SELECT
    module_id,
    content_hash,
    coalesce(source_kind, 'text') AS form,
    assignment_fingerprint
      || '#'
      || CAST(
        row_number() OVER (
          PARTITION BY assignment_fingerprint, coalesce(source_kind, 'text')
          ORDER BY content_hash
        ) AS VARCHAR
      ) AS fingerprint_copy
  FROM modules
),
keyed AS (
  SELECT
    module_id,
    coalesce(fingerprint_copy, content_hash) AS compile_key,
    row_number() OVER (
      PARTITION BY coalesce(fingerprint_copy, content_hash)
      ORDER BY
        CASE form
          WHEN 'text+proto' THEN 0
          WHEN 'text' THEN 1
          WHEN 'proto' THEN 2
          ELSE 3
        END,
        content_hash
    ) AS form_rank
  FROM copies
)
SELECT
  k.module_id,
  k.compile_key,
  p.module_id AS primary_module_id
FROM keyed AS k
JOIN keyed AS p
  ON p.compile_key = k.compile_key AND p.form_rank = 1
