-- name: peak-list-sum
-- description: Modules whose logical_peak_bytes differs from the sum of their printed peak list.
-- column module_id: Module.
-- column logical_peak_bytes: The module's logical peak.
-- column printed: The sum of its peak list.
SELECT
  m.module_id,
  m.logical_peak_bytes,
  coalesce(sum(p.bytes), 0) AS printed
FROM modules AS m
LEFT JOIN peak_values AS p USING (module_id)
WHERE m.logical_peak_time IS NOT NULL
GROUP BY m.module_id, m.logical_peak_bytes
HAVING m.logical_peak_bytes IS DISTINCT FROM coalesce(sum(p.bytes), 0)
ORDER BY 1
