-- name: diff-logical
-- description: The values the logical peak counts: the `Live ranges at T (peak)` list of the given modules, resolved to values, with their logical bytes.
-- param ids BIGINT[] = NULL: The modules (modules.module_id).
-- column module_id: Module.
-- column value_id: Value (hlo_values.value_id).
-- column size: Logical bytes as printed (summed when a value is listed twice).
-- note: logical_peak_bytes is the sum of the printed list; entries not resolved to a value are left out here, so the causes count them in the residual (`other`).
SELECT module_id, value_id, CAST(sum(bytes) AS BIGINT) AS size
FROM peak_values
WHERE module_id IN (SELECT unnest($ids)) AND value_id IS NOT NULL
GROUP BY module_id, value_id
ORDER BY module_id, value_id
