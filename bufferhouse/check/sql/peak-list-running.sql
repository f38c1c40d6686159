-- name: peak-list-running
-- description: Peak-list entries whose printed cumulative bytes differ from the running sum of the list.
-- column module_id: Module.
-- column ordinal: The entry's position in the list.
-- column cumulative_bytes: What the dump printed.
-- column running: The running sum of the entries' bytes.
SELECT module_id, ordinal, cumulative_bytes, running
FROM (
  SELECT
    module_id,
    ordinal,
    cumulative_bytes,
    sum(bytes) OVER (PARTITION BY module_id ORDER BY ordinal) AS running
  FROM peak_values
)
WHERE cumulative_bytes IS NOT NULL AND cumulative_bytes <> running
ORDER BY 1, 2
