-- name: oom-events
-- description: The fleet's out-of-memory events from logs: where, which program, what was asked for and what the memory held.
-- param label VARCHAR = NULL: Only events with this `key=value` label; NULL for all.
-- param program VARCHAR = NULL: Only events of this program (oom_events.program_name); NULL for all.
-- column event_id: Event (oom_events.event_id; grows with ingest order).
-- column path: Log file.
-- column line: Line of the message's first line.
-- column form: buffer_assignment, tpu_compile, tpu_runtime, allocation or other.
-- column memory_space: Memory space named (hbm, vmem, ...).
-- column program_name: Module or program the message names (jit_F).
-- column requested_bytes: The allocation that failed.
-- column capacity_bytes: Capacity of the memory space, where printed.
-- column total_bytes: What the program needed: XLA's total allocation, or the TPU's total usage or used bytes.
-- column buffer_count: Buffers listed.
-- column listed_bytes: Sum of the listed buffers' sizes.
-- column largest_op_name: op_name of the largest listed buffer, the first listed of equals (NULL if it has none).
-- column truncated: The message was cut short.
-- column problem_count: Parts that could not be read (see diagnostics).
-- column labels: The event's labels as `k=v` joined by commas.
-- note: Sizes are bytes; most were printed rounded (see oom_events.exact_figures).
-- example: bufferhouse query oom-events --param label=team=infra
WITH chosen AS (
  SELECT *
  FROM oom_events
  WHERE
    ($program IS NULL OR program_name = $program)
    AND (
      $label IS NULL
      OR event_id IN (
        SELECT event_id FROM oom_labels WHERE key || '=' || value = $label
      )
    )
),
ranked AS (
  SELECT
    event_id, size_bytes, op_name,
    row_number() OVER (
      PARTITION BY event_id ORDER BY size_bytes DESC NULLS LAST, rank
    ) AS nth
  FROM oom_buffers
  WHERE event_id IN (SELECT event_id FROM chosen)
),
listed AS (
  SELECT
    event_id,
    sum(size_bytes) AS listed_bytes,
    min(CASE WHEN nth = 1 THEN op_name END) AS largest_op_name
  FROM ranked
  GROUP BY event_id
),
tags AS (
  SELECT
    event_id,
    string_agg(key || '=' || value, ',' ORDER BY key, value) AS labels
  FROM oom_labels
  WHERE event_id IN (SELECT event_id FROM chosen)
  GROUP BY event_id
)
SELECT
  e.event_id,
  e.path,
  e.line,
  e.form,
  e.memory_space,
  e.program_name,
  e.requested_bytes,
  e.capacity_bytes,
  coalesce(
    e.total_allocation_bytes, e.total_usage_bytes, e.used_bytes
  ) AS total_bytes,
  e.buffer_count,
  l.listed_bytes,
  l.largest_op_name,
  e.truncated,
  e.problem_count,
  t.labels
FROM chosen AS e
LEFT JOIN listed AS l
  ON l.event_id = e.event_id
LEFT JOIN tags AS t
  ON t.event_id = e.event_id
ORDER BY e.path, e.line
