-- name: orphan-diagnostics
-- description: Diagnostics of a module that is not in modules (those of failed modules have no module).
-- column module_id: The missing module.
-- column n: How many diagnostics point at it.
SELECT module_id, count(*) AS n
FROM diagnostics
WHERE
  module_id IS NOT NULL
  AND module_id NOT IN (SELECT module_id FROM modules)
GROUP BY module_id
ORDER BY module_id
