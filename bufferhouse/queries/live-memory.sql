-- name: live-memory
-- description: What each device held at each snapshot of a device memory profile: its live buffers' bytes and count, the loaded executables on a row of their own.
-- param snapshot VARCHAR = NULL: Only this snapshot: its snapshot_id, 12-digit hash prefix, path or file name (snapshot_keys); NULL for all.
-- param label VARCHAR = NULL: Only snapshots with this `key=value` label; NULL for all.
-- column snapshot_id: Snapshot (runtime_snapshots.snapshot_id).
-- column path: The profile file.
-- column device: Device as the profile names it (cpu:0, cuda:0, TPU_0); NULL on the executables' row.
-- column kind: buffer, or executable for the snapshot's loaded executables.
-- column live_bytes: Bytes of the live buffers on the device (executables: their code's bytes as the runtime reports them, 0 on CPU).
-- column array_count: Live buffers on the device: one per array on a device, one per shard of a sharded array (executables: how many).
-- column share_pct: live_bytes as a percentage of all the snapshot's buffer bytes.
-- note: One row per snapshot and device, ordered by path; a replicated array counts on every device that holds a copy.
-- example: bufferhouse query live-memory --param snapshot=after.prof
WITH chosen AS (
  SELECT snapshot_id, path, buffer_bytes
  FROM runtime_snapshots
  WHERE
    (
      $snapshot IS NULL
      OR snapshot_id IN (
        SELECT snapshot_id FROM snapshot_keys WHERE key = $snapshot
      )
    )
    AND (
      $label IS NULL
      OR snapshot_id IN (
        SELECT snapshot_id FROM runtime_labels
        WHERE key || '=' || value = $label
      )
    )
),
held AS (
  SELECT
    snapshot_id,
    device,
    kind,
    CAST(sum(bytes) AS BIGINT) AS live_bytes,
    CAST(sum(count) AS BIGINT) AS array_count
  FROM runtime_samples
  WHERE snapshot_id IN (SELECT snapshot_id FROM chosen)
  GROUP BY snapshot_id, device, kind
)
SELECT
  c.snapshot_id,
  c.path,
  h.device,
  h.kind,
  h.live_bytes,
  h.array_count,
  CASE
    WHEN h.kind = 'buffer'
      THEN round(100.0 * h.live_bytes / nullif(c.buffer_bytes, 0), 2)
  END AS share_pct
FROM chosen AS c
JOIN held AS h
  ON h.snapshot_id = c.snapshot_id
ORDER BY c.path, c.snapshot_id, h.kind, h.device
