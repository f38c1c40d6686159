-- name: oom-culprits
-- description: The ops and source lines that top the buffer lists of OOM messages across the fleet, by how many events list them and how many bytes.
-- param top INTEGER >= 0 = 20: How many culprits; NULL for all.
-- param label VARCHAR = NULL: Only events with this `key=value` label; NULL for all.
-- column op_name: Framework op name of the buffer (`Operator:` op_name); NULL for buffers listed without one but with a source line.
-- column source: source_file:source_line of the op, NULL if not printed.
-- column events: OOM events that list it.
-- column buffers: Listed buffers with this op and source.
-- column total_bytes: Sum of their sizes.
-- column largest_bytes: The largest of them.
-- column share: total_bytes over the bytes of all listed buffers (of the chosen events).
-- column programs: Programs whose OOMs list it, comma-separated.
-- note: A buffer without op_name and source line (an entry parameter, a constant) is no culprit and not counted here; it still counts in share's denominator.
-- example: bufferhouse query oom-culprits --param top=10
WITH chosen AS (
  SELECT event_id, program_name
  FROM oom_events
  WHERE
    $label IS NULL
    OR event_id IN (
      SELECT event_id FROM oom_labels WHERE key || '=' || value = $label
    )
),
listed AS (
  SELECT
    b.event_id, b.size_bytes, b.op_name,
    b.source_file || ':' || CAST(b.source_line AS VARCHAR) AS source,
    c.program_name
  FROM oom_buffers AS b
  JOIN chosen AS c
    ON c.event_id = b.event_id
),
culprits AS (
  SELECT *
  FROM listed
  WHERE op_name IS NOT NULL OR source IS NOT NULL
),
names AS (
  -- each program once per culprit, then joined in order (a DISTINCT inside the
  -- ordered aggregate is not portable)
  SELECT
    op_name, source,
    string_agg(program_name, ',' ORDER BY program_name) AS programs
  FROM (
    SELECT op_name, source, program_name
    FROM culprits
    GROUP BY op_name, source, program_name
  ) AS once
  GROUP BY op_name, source
),
everything AS (
  SELECT sum(size_bytes) AS bytes FROM listed
),
ranked AS (
  SELECT
    op_name,
    source,
    count(DISTINCT event_id) AS events,
    count(*) AS buffers,
    sum(size_bytes) AS total_bytes,
    max(size_bytes) AS largest_bytes,
    round(sum(size_bytes) / (SELECT bytes FROM everything), 4) AS share
  FROM culprits
  GROUP BY op_name, source
)
SELECT
  r.op_name,
  r.source,
  r.events,
  r.buffers,
  r.total_bytes,
  r.largest_bytes,
  r.share,
  n.programs
FROM ranked AS r
LEFT JOIN names AS n
  ON
    n.op_name IS NOT DISTINCT FROM r.op_name
    AND n.source IS NOT DISTINCT FROM r.source
ORDER BY
  r.events DESC, r.total_bytes DESC NULLS LAST, r.op_name, r.source
LIMIT $top
