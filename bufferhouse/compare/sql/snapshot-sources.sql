-- name: diff-snapshot-sources
-- description: Live buffer bytes of two device memory snapshots by the line that allocated them, per device, base against head: which line of the program holds more device memory now.
-- column pair: The snapshot pair (diff-snapshot-devices.pair): 0 for two profiles, one per profile name for two directories.
-- column device: Device as the profiles name it (cpu:0, TPU_0).
-- column function: The allocating function (runtime_samples.source_function); NULL for `(jax)` and `(no stack)`.
-- column source: The allocating line as file:line (live-by-source's rule: the innermost frame outside jax and jaxlib); `(jax)` when every frame is jax's own, `(no stack)` without a stack.
-- column status: new (only in head), gone (only in base), grown, shrunk or same, by bytes.
-- column base_bytes: Bytes the line held on the device in the base snapshot.
-- column head_bytes: In the head snapshot.
-- column delta_bytes: head_bytes - base_bytes.
-- column base_count: Buffers it held in the base snapshot.
-- column head_count: In the head snapshot.
-- column count_delta: head_count - base_count.
-- column change_pct: 100 * delta_bytes / base_bytes; 0 when both are 0; NULL when base_bytes is 0 and the line holds bytes now.
-- note: Runs on a scratch connection over Arrow tables `base_samples` and `head_samples` (the runtime_samples rows of each side's snapshot, with the pair number). Buffers only, as the device totals: the rows of a device sum exactly to its change in diff-snapshot-devices.
WITH sides AS (
  SELECT FALSE AS is_head, *
  FROM base_samples
  WHERE kind = 'buffer'
  UNION ALL BY NAME
  SELECT TRUE AS is_head, *
  FROM head_samples
  WHERE kind = 'buffer'
),
keyed AS (
  SELECT
    is_head,
    pair,
    device,
    count,
    bytes,
    CASE
      WHEN stack_id IS NULL THEN '(no stack)'
      WHEN source_file IS NULL THEN '(jax)'
      ELSE source_file || ':' || CAST(source_line AS VARCHAR)
    END AS source,
    CASE
      WHEN stack_id IS NOT NULL AND source_file IS NOT NULL
        THEN source_function
    END AS function
  FROM sides
),
sums AS (
  SELECT
    pair,
    device,
    function,
    source,
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
  FROM keyed
  GROUP BY pair, device, function, source
)
SELECT
  pair,
  device,
  function,
  source,
  CASE
    WHEN base_samples = 0 THEN 'new'
    WHEN head_samples = 0 THEN 'gone'
    WHEN head_bytes > base_bytes THEN 'grown'
    WHEN head_bytes < base_bytes THEN 'shrunk'
    ELSE 'same'
  END AS status,
  base_bytes,
  head_bytes,
  head_bytes - base_bytes AS delta_bytes,
  base_count,
  head_count,
  head_count - base_count AS count_delta,
  CASE
    WHEN head_bytes = base_bytes THEN 0.0
    WHEN base_bytes > 0 THEN 100.0 * (head_bytes - base_bytes) / base_bytes
  END AS change_pct
FROM sums
ORDER BY
  pair,
  device NULLS LAST,
  abs(delta_bytes) DESC,
  abs(count_delta) DESC,
  source,
  function NULLS FIRST
