-- name: live-growth
-- description: What grew between two snapshots (of one run, or of two runs), by the Python line that allocated it, per device: the leak view.
-- param before VARCHAR = NULL: The earlier snapshot: snapshot_id, 12-digit hash prefix, path or file name (snapshot_keys); NULL: the second latest by taken_at.
-- param after VARCHAR = NULL: The later snapshot, named the same ways; NULL: the latest by taken_at.
-- column source: The allocating line as file:line (live-by-source's rule); `(jax)` when every frame is jax's own, `(no stack)` without a stack.
-- column device: Device as the profile names it.
-- column before_bytes: Bytes the line held on the device in the earlier snapshot.
-- column after_bytes: In the later one.
-- column growth_bytes: after_bytes - before_bytes (negative: freed).
-- column before_count: Buffers it held in the earlier snapshot.
-- column after_count: In the later one.
-- column growth_count: after_count - before_count.
-- note: Only lines whose bytes or buffers changed; buffers only. With one snapshot in the warehouse and no `before`, an error: one snapshot alone shows no growth. A name that selects several snapshots (two runs' after.prof) is an error: give its path, id or hash prefix.
-- example: bufferhouse query live-growth --param before=before.prof --param after=after.prof
WITH ranked AS (
  SELECT
    snapshot_id,
    row_number() OVER (
      ORDER BY taken_at DESC NULLS LAST, path DESC, snapshot_id DESC
    ) AS recency
  FROM runtime_snapshots
),
wanted AS (
  SELECT *
  FROM (VALUES (FALSE, $before, 2), (TRUE, $after, 1))
    AS w(is_after, key, default_recency)
),
-- Each side's one snapshot: the one its key selects, else the latest (after)
-- or the one before it (before); a key selecting none or several is an error.
picked AS (
  SELECT
    w.is_after,
    CASE
      WHEN count(DISTINCT r.snapshot_id) = 1
        THEN min(r.snapshot_id)
      -- no default snapshot: an empty warehouse compares nothing, but one
      -- snapshot alone is no growth (all of it would show as grown)
      WHEN w.key IS NULL AND count(r.snapshot_id) = 0
        AND (SELECT count(*) FROM runtime_snapshots) = 0
        THEN NULL
      WHEN w.key IS NULL AND count(r.snapshot_id) = 0
        THEN error(
          'live-growth: the warehouse holds one snapshot, so there is no '
          || 'earlier one to compare it with; ingest a second profile, or '
          || 'name both: --param before=... --param after=...'
        )
      WHEN count(r.snapshot_id) = 0
        THEN error('live-growth: no snapshot matches ''' || w.key || '''')
      ELSE error(
        'live-growth: ' || w.key || ' selects '
        || CAST(count(DISTINCT r.snapshot_id) AS VARCHAR)
        || ' snapshots; give its path, snapshot_id or hash prefix'
      )
    END AS snapshot_id
  FROM wanted AS w
  LEFT JOIN (
    SELECT r.snapshot_id, r.recency, k.key
    FROM ranked AS r
    JOIN snapshot_keys AS k
      ON k.snapshot_id = r.snapshot_id
  ) AS r
    ON (w.key IS NULL AND r.recency = w.default_recency) OR r.key = w.key
  GROUP BY w.is_after, w.key
),
samples AS (
  SELECT s.*, p.is_after
  FROM runtime_samples AS s
  JOIN picked AS p
    ON p.snapshot_id = s.snapshot_id
),
keyed AS (
  SELECT
    device,
    bytes,
    count,
    is_after,
    CASE
      WHEN stack_id IS NULL THEN '(no stack)'
      WHEN source_file IS NULL THEN '(jax)'
      ELSE source_file || ':' || CAST(source_line AS VARCHAR)
    END AS source
  FROM samples
  WHERE kind = 'buffer'
),
sides AS (
  SELECT
    source,
    device,
    CAST(coalesce(sum(bytes) FILTER (WHERE NOT is_after), 0) AS BIGINT)
      AS before_bytes,
    CAST(coalesce(sum(bytes) FILTER (WHERE is_after), 0) AS BIGINT)
      AS after_bytes,
    CAST(coalesce(sum(count) FILTER (WHERE NOT is_after), 0) AS BIGINT)
      AS before_count,
    CAST(coalesce(sum(count) FILTER (WHERE is_after), 0) AS BIGINT)
      AS after_count
  FROM keyed
  GROUP BY source, device
)
SELECT
  source,
  device,
  before_bytes,
  after_bytes,
  after_bytes - before_bytes AS growth_bytes,
  before_count,
  after_count,
  after_count - before_count AS growth_count
FROM sides
WHERE after_bytes <> before_bytes OR after_count <> before_count
ORDER BY growth_bytes DESC, source, device
