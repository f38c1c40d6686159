-- name: snapshot-duplicates
-- description: A snapshot_hash or snapshot_id held by more than one snapshot (a profile is loaded once, only labelled after).
-- column what: `snapshot_hash H` or `snapshot_id N`.
-- column n: How many snapshots hold it.
SELECT 'snapshot_hash ' || snapshot_hash AS what, count(*) AS n
FROM runtime_snapshots
GROUP BY snapshot_hash
HAVING count(*) > 1
UNION ALL
SELECT 'snapshot_id ' || snapshot_id AS what, count(*) AS n
FROM runtime_snapshots
GROUP BY snapshot_id
HAVING count(*) > 1
ORDER BY 1
