-- name: diff-snapshot-devices
-- description: Each device's live buffer bytes in two device memory snapshots, base against head: what the gate of a snapshot diff checks.
-- column pair: The snapshot pair: 0 for two profiles, one per profile name for two directories.
-- column base_snapshot: The base snapshot as given (a file name, a path inside a directory, or a selector of the warehouse).
-- column head_snapshot: The head snapshot, named the same way.
-- column device: Device as the profiles name it (cpu:0, TPU_0).
-- column status: new (only in head), gone (only in base), grown, shrunk or same, by bytes.
-- column base_bytes: Live buffer bytes on the device in the base snapshot (the sum of its buffer samples).
-- column head_bytes: In the head snapshot.
-- column delta_bytes: head_bytes - base_bytes.
-- column change_pct: 100 * delta_bytes / base_bytes; 0 when both are 0; NULL when base_bytes is 0 and the device holds bytes now.
-- column base_count: Live buffers on the device in the base snapshot.
-- column head_count: In the head snapshot.
-- column count_delta: head_count - base_count.
-- note: Runs on a scratch connection over Arrow tables `snapshot_pairs` (pair, base_snapshot, head_snapshot), `base_samples` and `head_samples`. Summed from the samples themselves, not from diff-snapshot-sources, so that the rows' sums can be checked against it. Buffers only: executables (device NULL) are not device memory in the profile.
WITH sides AS (
  SELECT FALSE AS is_head, pair, device, count, bytes
  FROM base_samples
  WHERE kind = 'buffer'
  UNION ALL
  SELECT TRUE AS is_head, pair, device, count, bytes
  FROM head_samples
  WHERE kind = 'buffer'
),
sums AS (
  SELECT
    pair,
    device,
    count(*) FILTER (WHERE NOT is_head) AS base_samples,
    count(*) FILTER (WHERE is_head) AS head_samples,
    CAST(coalesce(sum(bytes) FILTER (WHERE NOT is_head), 0) AS BIGINT)
      AS base_bytes,
    CAST(coalesce(sum(bytes) FILTER (WHERE is_head), 0) AS BIGINT)
      AS head_bytes,
    CAST(coalesce(sum(count) FILTER (WHERE NOT is_head), 0) AS BIGINT)
      AS base_count,
    CAST(coalesce(sum(count) FILTER (WHERE is_head), 0) AS BIGINT)
      AS head_count
  FROM sides
  GROUP BY pair, device
)
SELECT
  s.pair,
  p.base_snapshot,
  p.head_snapshot,
  s.device,
  CASE
    WHEN s.base_samples = 0 THEN 'new'
    WHEN s.head_samples = 0 THEN 'gone'
    WHEN s.head_bytes > s.base_bytes THEN 'grown'
    WHEN s.head_bytes < s.base_bytes THEN 'shrunk'
    ELSE 'same'
  END AS status,
  s.base_bytes,
  s.head_bytes,
  s.head_bytes - s.base_bytes AS delta_bytes,
  CASE
    WHEN s.head_bytes = s.base_bytes THEN 0.0
    WHEN s.base_bytes > 0
      THEN 100.0 * (s.head_bytes - s.base_bytes) / s.base_bytes
  END AS change_pct,
  s.base_count,
  s.head_count,
  s.head_count - s.base_count AS count_delta
FROM sums AS s
JOIN snapshot_pairs AS p
  ON p.pair = s.pair
ORDER BY s.pair, s.device NULLS LAST
