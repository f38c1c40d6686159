-- name: total-bytes
-- description: Modules whose printed `Total bytes used` differs from the sum of their allocation sizes.
-- column module_id: Module.
-- column total_bytes: What the dump printed.
-- column allocated: The sum of its allocation sizes.
SELECT
  m.module_id,
  m.total_bytes,
  coalesce(sum(a.size), 0) AS allocated
FROM modules AS m
LEFT JOIN allocations AS a USING (module_id)
WHERE m.total_bytes IS NOT NULL
GROUP BY m.module_id, m.total_bytes
HAVING m.total_bytes <> coalesce(sum(a.size), 0)
ORDER BY 1
