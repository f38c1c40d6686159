-- name: snapshot-totals
-- description: Snapshots whose stored samples do not add up to the totals recorded with them (a snapshot is written whole).
-- column snapshot_id: The snapshot.
-- column path: Its profile file.
-- column what: The total that differs.
-- column recorded: As recorded in runtime_snapshots.
-- column stored: As the stored rows add up.
WITH sums AS (
  SELECT
    s.snapshot_id,
    s.path,
    s.buffer_count,
    s.buffer_bytes,
    s.executable_count,
    s.executable_bytes,
    s.stack_count,
    coalesce(sum(x.count) FILTER (WHERE x.kind = 'buffer'), 0) AS buffers,
    coalesce(sum(x.bytes) FILTER (WHERE x.kind = 'buffer'), 0) AS buffer_sum,
    coalesce(sum(x.count) FILTER (WHERE x.kind = 'executable'), 0) AS executables,
    coalesce(sum(x.bytes) FILTER (WHERE x.kind = 'executable'), 0) AS executable_sum,
    (
      SELECT count(DISTINCT f.stack_id)
      FROM runtime_frames AS f
      WHERE f.snapshot_id = s.snapshot_id
    ) AS stacks
  FROM runtime_snapshots AS s
  LEFT JOIN runtime_samples AS x
    ON x.snapshot_id = s.snapshot_id
  GROUP BY ALL
)
SELECT snapshot_id, path, what, recorded, stored
FROM (
  SELECT snapshot_id, path, 'buffer_count' AS what, buffer_count AS recorded,
    buffers AS stored
  FROM sums
  UNION ALL
  SELECT snapshot_id, path, 'buffer_bytes', buffer_bytes, buffer_sum FROM sums
  UNION ALL
  SELECT snapshot_id, path, 'executable_count', executable_count, executables FROM sums
  UNION ALL
  SELECT snapshot_id, path, 'executable_bytes', executable_bytes, executable_sum FROM sums
  UNION ALL
  SELECT snapshot_id, path, 'stack_count', stack_count, stacks FROM sums
)
WHERE recorded <> stored
ORDER BY snapshot_id, what
