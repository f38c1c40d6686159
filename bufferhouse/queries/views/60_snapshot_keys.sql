-- name: snapshot_keys
-- description: Every string that selects a snapshot in a query's snapshot parameters (`snapshot`, `before`, `after`): its snapshot_id, content-hash prefix (12 hex digits), path and file name.
-- column snapshot_id: Snapshot (runtime_snapshots.snapshot_id).
-- column key: A name that selects it.
SELECT snapshot_id, CAST(snapshot_id AS VARCHAR) AS key
FROM runtime_snapshots
UNION
SELECT snapshot_id, substr(snapshot_hash, 1, 12)
FROM runtime_snapshots
UNION
SELECT snapshot_id, path
FROM runtime_snapshots
UNION
SELECT snapshot_id, regexp_replace(path, '^.*/', '')
FROM runtime_snapshots
