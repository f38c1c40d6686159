-- name: snapshot-orphans
-- description: Rows of a table with a snapshot_id (runtime_samples, runtime_frames, runtime_labels) whose snapshot is not in runtime_snapshots.
-- param table_name VARCHAR = NULL: the table searched
-- column snapshot_id: The missing snapshot.
-- column n: How many rows point at it.
SELECT snapshot_id, count(*) AS n
FROM query_table($table_name)
WHERE snapshot_id NOT IN (SELECT snapshot_id FROM runtime_snapshots)
GROUP BY snapshot_id
ORDER BY snapshot_id
