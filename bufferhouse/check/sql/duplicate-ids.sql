-- name: duplicate-ids
-- description: Module ids held by more than one module.
-- column module_id: The id.
-- column n: How many modules carry it.
SELECT module_id, count(*) AS n
FROM modules
GROUP BY 1
HAVING count(*) > 1
ORDER BY 1
