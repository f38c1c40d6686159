-- name: live-by-source
-- description: Live buffer bytes by the Python line (or function) that allocated them, per device, across snapshots: which line of my code holds device memory.
-- param key_by VARCHAR in (line, function) = 'line': Group by `line` (file:line) or `function` (file:function).
-- param snapshot VARCHAR = NULL: Only this snapshot (snapshot_keys); NULL for all.
-- param label VARCHAR = NULL: Only snapshots with this `key=value` label; NULL for all.
-- param top INTEGER >= 0 = 100: Rows to return, largest max_bytes first; NULL for all.
-- column source: The allocating line as file:line (or file:function): the innermost frame of the stack outside jax and jaxlib (runtime_samples.source_file); `(jax)` when every frame is jax's own, `(no stack)` without a stack.
-- column device: Device as the profile names it.
-- column snapshots: Snapshots in which the source held buffers on the device.
-- column max_bytes: The most it held on the device in one snapshot.
-- column max_count: The most buffers it held on the device in one snapshot.
-- column total_bytes: Its bytes summed over those snapshots.
-- note: Buffers only (executables: live-memory). The full stacks are in runtime_frames.
-- example: bufferhouse query live-by-source --param key_by=function
WITH chosen AS (
  SELECT snapshot_id
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
keyed AS (
  SELECT
    snapshot_id,
    device,
    bytes,
    count,
    CASE
      WHEN stack_id IS NULL THEN '(no stack)'
      WHEN source_file IS NULL THEN '(jax)'
      WHEN $key_by = 'line'
        THEN source_file || ':' || CAST(source_line AS VARCHAR)
      WHEN $key_by = 'function' THEN source_file || ':' || source_function
      ELSE error('key_by must be line or function')
    END AS source
  FROM runtime_samples
  WHERE
    kind = 'buffer'
    AND snapshot_id IN (SELECT snapshot_id FROM chosen)
),
per_snapshot AS (
  SELECT
    source,
    device,
    snapshot_id,
    sum(bytes) AS bytes,
    sum(count) AS buffers
  FROM keyed
  GROUP BY source, device, snapshot_id
)
SELECT
  source,
  device,
  count(*) AS snapshots,
  CAST(max(bytes) AS BIGINT) AS max_bytes,
  CAST(max(buffers) AS BIGINT) AS max_count,
  CAST(sum(bytes) AS BIGINT) AS total_bytes
FROM per_snapshot
GROUP BY source, device
ORDER BY max_bytes DESC, source, device
LIMIT $top
