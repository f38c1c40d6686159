-- name: device-budget
-- description: Will the next step fit: per device, the live buffers of a snapshot plus the largest transient of the compiled modules of the same run, against a capacity.
-- param snapshot VARCHAR = NULL: The snapshot (snapshot_id, 12-digit hash prefix, path or file name: snapshot_keys); NULL: the latest of each ingest run, by taken_at.
-- param module VARCHAR = NULL: Count these modules' transients (module name, file stem, module_id or hash prefix); NULL: the modules the snapshot's ingest run loaded.
-- param capacity VARCHAR = NULL: Device memory, e.g. 16GiB, 80GB, 1.5TiB or bytes, read by bh_size_bytes (K, Ki, KiB... are powers of 1024; KB, MB... of 1000; anything else is an error); NULL: the capacity of transient_module's target (module_targets: the dump's, else the chip table's for its device kind, docs/fits.md), else fits and headroom stay NULL.
-- column snapshot_id: Snapshot (runtime_snapshots.snapshot_id).
-- column path: The profile file.
-- column device: Device as the profile names it.
-- column live_bytes: Bytes of its live buffers in the snapshot (parameters, optimizer state, caches: all that is alive).
-- column array_count: Its live buffers.
-- column transient_bytes: The transient of transient_module: the bytes a run of the module allocates beside its arguments: allocations of category temp and output (non-aliased outputs) in memory space 0; NULL without modules.
-- column transient_module: The module whose transient is counted: the largest transient of the modules that are not jax's helper programs (bh_is_helper: jit__multi_slice, what jax compiles for device_put and slicing, or an eagerly dispatched jit_<primitive>), of a helper only when no other module is counted; ties: the first by name, then module_id.
-- column transient_module_id: Its module_id (the name alone may stand for several compiles).
-- column need_bytes: live_bytes + transient_bytes: what the device holds while that module runs once more.
-- column capacity_bytes: The capacity given, in bytes; else transient_module's (module_targets.capacity_bytes).
-- column capacity_source: param (given), or module_targets.capacity_source of transient_module: dump (its dump states the device's memory) or table (the chip table's figure for its device kind); NULL without a capacity.
-- column device_kind: transient_module's device kind (module_targets.device_kind), whose capacity is the default.
-- column headroom_bytes: capacity_bytes - need_bytes; negative: short by that much.
-- column fits: need_bytes <= capacity_bytes.
-- note: A compiled module's sizes are per device (an SPMD program is one device's share), and every module counted is assumed to run on every device of the snapshot: the profile does not say which executable runs where.
-- note: A device memory profile names no executable: jax labels an executable's sample only kind=executable, with the Python stack of its compile and its generated code's size (runtime_samples), so the step is chosen among the modules of the snapshot's ingest run by transient, not matched to the profile's largest executable. Nor does it name the device kind (its devices are cpu:0, cuda:0, TPU_0): the capacity default is the kind of the module counted, from its dump's target files.
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
    module_id,
    module_name,
    transient_bytes,
    row_number() OVER (
      PARTITION BY snapshot_id
      -- a jax helper (jit__multi_slice, the jit__ programs of device_put and
      -- friends, a primitive dispatched eagerly) is taken only when the run
      -- compiled nothing else
      ORDER BY
        coalesce(bh_is_helper(module_name), FALSE),
        transient_bytes DESC, module_name, module_id
    ) AS nth
  FROM transients
),
capacity AS (
  SELECT bh_size_bytes($capacity, 'capacity') AS capacity_bytes
),
budget AS (
  SELECT
    g.snapshot_id,
    g.module_id,
    g.module_name,
    g.transient_bytes,
    t.device_kind,
    coalesce(k.capacity_bytes, t.capacity_bytes) AS capacity_bytes,
    CASE
      WHEN k.capacity_bytes IS NOT NULL THEN 'param'
      ELSE t.capacity_source
    END AS capacity_source
  FROM largest AS g
  CROSS JOIN capacity AS k
  LEFT JOIN module_targets AS t
    ON t.module_id = g.module_id
  WHERE g.nth = 1
)
SELECT
  c.snapshot_id,
  c.path,
  l.device,
  l.live_bytes,
  l.array_count,
  g.transient_bytes,
  g.module_name AS transient_module,
  g.module_id AS transient_module_id,
  l.live_bytes + coalesce(g.transient_bytes, 0) AS need_bytes,
  coalesce(g.capacity_bytes, k.capacity_bytes) AS capacity_bytes,
  coalesce(
    g.capacity_source,
    CASE WHEN k.capacity_bytes IS NOT NULL THEN 'param' END
  ) AS capacity_source,
  g.device_kind,
  coalesce(g.capacity_bytes, k.capacity_bytes) - l.live_bytes
  - coalesce(g.transient_bytes, 0) AS headroom_bytes,
  l.live_bytes + coalesce(g.transient_bytes, 0)
  <= coalesce(g.capacity_bytes, k.capacity_bytes) AS fits
FROM chosen AS c
JOIN live AS l
  ON l.snapshot_id = c.snapshot_id
LEFT JOIN budget AS g
  ON g.snapshot_id = c.snapshot_id
CROSS JOIN capacity AS k
ORDER BY c.path, c.snapshot_id, l.device
