-- name: device-budget
-- description: Will the next step fit: per device, the live buffers of a snapshot plus the largest transient of the compiled modules of the same run, against a capacity.
-- param snapshot VARCHAR = NULL: The snapshot (snapshot_id, 12-digit hash prefix, path or file name: snapshot_keys); NULL: the latest of each ingest run, by taken_at.
-- param module VARCHAR = NULL: Count these modules' transients (module name, file stem, module_id or hash prefix); NULL: the modules the snapshot's ingest run loaded.
-- param capacity VARCHAR = NULL: Device memory, e.g. 16GiB, 80GB, 1.5TiB or bytes (K, M, G, T and KiB... are powers of 1024; KB, MB... of 1000); NULL: fits and headroom stay NULL.
-- column snapshot_id: Snapshot (runtime_snapshots.snapshot_id).
-- column path: The profile file.
-- column device: Device as the profile names it.
-- column live_bytes: Bytes of its live buffers in the snapshot (parameters, optimizer state, caches: all that is alive).
-- column array_count: Its live buffers.
-- column transient_bytes: The transient of transient_module: the bytes a run of the module allocates beside its arguments: allocations of category temp and output (non-aliased outputs) in memory space 0; NULL without modules.
-- column transient_module: The module whose transient is counted: the largest transient of the modules that are not jax helpers (a name starting jit__, e.g. jit__multi_slice: what jax compiles for device_put, slicing and resharding), of a helper only when no other module is counted; ties: the first by name, then module_id.
-- column need_bytes: live_bytes + transient_bytes: what the device holds while that module runs once more.
-- column capacity_bytes: The capacity given, in bytes.
-- column headroom_bytes: capacity_bytes - need_bytes; negative: short by that much.
-- column fits: need_bytes <= capacity_bytes.
-- note: A compiled module's sizes are per device (an SPMD program is one device's share), and every module counted is assumed to run on every device of the snapshot: the profile does not say which executable runs where. No capacity is guessed from the device name (a profile names the platform, not the model).
-- example: bufferhouse query device-budget --param capacity=16GiB
WITH ranked AS (
  SELECT
    snapshot_id,
    run_id,
    path,
    row_number() OVER (
      PARTITION BY run_id
      ORDER BY taken_at DESC NULLS LAST, path DESC, snapshot_id DESC
    ) AS recency
  FROM runtime_snapshots
),
chosen AS (
  SELECT snapshot_id, run_id, path
  FROM ranked
  WHERE
    CASE
      WHEN $snapshot IS NULL THEN recency = 1
      ELSE snapshot_id IN (
        SELECT snapshot_id FROM snapshot_keys WHERE key = $snapshot
      )
    END
),
live AS (
  SELECT
    snapshot_id,
    device,
    CAST(sum(bytes) AS BIGINT) AS live_bytes,
    CAST(sum(count) AS BIGINT) AS array_count
  FROM runtime_samples
  WHERE
    kind = 'buffer'
    AND snapshot_id IN (SELECT snapshot_id FROM chosen)
  GROUP BY snapshot_id, device
),
wanted AS (
  -- the module selector: see queries/__init__.py
  SELECT module_id
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
counted AS (
  SELECT c.snapshot_id, m.module_id, m.module_name
  FROM chosen AS c
  JOIN modules AS m
    ON
      CASE
        WHEN $module IS NULL THEN m.run_id = c.run_id
        ELSE m.module_id IN (SELECT module_id FROM wanted)
      END
),
transients AS (
  SELECT
    c.snapshot_id,
    c.module_id,
    c.module_name,
    CAST(sum(a.size) AS BIGINT) AS transient_bytes
  FROM counted AS c
  JOIN allocations AS a
    ON a.module_id = c.module_id
  WHERE a.color = 0 AND a.category IN ('temp', 'output')
  GROUP BY c.snapshot_id, c.module_id, c.module_name
),
largest AS (
  SELECT
    snapshot_id,
    module_name,
    transient_bytes,
    row_number() OVER (
      PARTITION BY snapshot_id
      -- a jax helper (jit__multi_slice, the jit__ programs of device_put and
      -- friends) is taken only when the run compiled nothing else
      ORDER BY
        coalesce(module_name, '') LIKE 'jit\_\_%' ESCAPE '\',
        transient_bytes DESC, module_name, module_id
    ) AS nth
  FROM transients
),
capacity AS (
  SELECT
    CASE
      WHEN $capacity IS NULL THEN NULL
      WHEN regexp_extract(
        trim($capacity), '^[0-9]+(\.[0-9]+)?\s*([KMGTkmgt]i?[Bb]?|[Bb])?', 0
      ) = trim($capacity)
        THEN CAST(
          CAST(regexp_extract(trim($capacity), '^[0-9.]+', 0) AS DOUBLE)
          * CASE upper(regexp_replace(trim($capacity), '^[0-9.]+\s*', ''))
            WHEN 'KB' THEN 1e3
            WHEN 'MB' THEN 1e6
            WHEN 'GB' THEN 1e9
            WHEN 'TB' THEN 1e12
            WHEN 'K' THEN 1024.0
            WHEN 'KIB' THEN 1024.0
            WHEN 'KI' THEN 1024.0
            WHEN 'M' THEN 1048576.0
            WHEN 'MIB' THEN 1048576.0
            WHEN 'MI' THEN 1048576.0
            WHEN 'G' THEN 1073741824.0
            WHEN 'GIB' THEN 1073741824.0
            WHEN 'GI' THEN 1073741824.0
            WHEN 'T' THEN 1099511627776.0
            WHEN 'TIB' THEN 1099511627776.0
            WHEN 'TI' THEN 1099511627776.0
            ELSE 1.0
          END AS BIGINT
        )
      ELSE error(
        'device-budget: capacity wants a size like 16GiB, 80GB or 1000000,'
        || ' got ' || $capacity
      )
    END AS capacity_bytes
)
SELECT
  c.snapshot_id,
  c.path,
  l.device,
  l.live_bytes,
  l.array_count,
  g.transient_bytes,
  g.module_name AS transient_module,
  l.live_bytes + coalesce(g.transient_bytes, 0) AS need_bytes,
  k.capacity_bytes,
  k.capacity_bytes - l.live_bytes - coalesce(g.transient_bytes, 0)
    AS headroom_bytes,
  l.live_bytes + coalesce(g.transient_bytes, 0) <= k.capacity_bytes AS fits
FROM chosen AS c
JOIN live AS l
  ON l.snapshot_id = c.snapshot_id
LEFT JOIN largest AS g
  ON g.snapshot_id = c.snapshot_id AND g.nth = 1
CROSS JOIN capacity AS k
ORDER BY c.path, c.snapshot_id, l.device
