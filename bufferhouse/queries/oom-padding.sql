-- name: oom-padding
-- description: How much of each TPU OOM was padding: the listed buffers' size against their unpadded size, and the HLO temp totals printed.
-- param label VARCHAR = NULL: Only events with this `key=value` label; NULL for all.
-- column event_id: Event (oom_events.event_id).
-- column path: Log file.
-- column line: Line of the message's first line.
-- column program_name: Module or program the message names.
-- column memory_space: Memory space (hbm, vmem, ...).
-- column listed_bytes: Sum of the listed buffers' sizes (padded).
-- column listed_unpadded_bytes: Sum of their unpadded sizes.
-- column listed_padding_bytes: Sum of their padding (printed, else size - unpadded).
-- column padding_share: listed_padding_bytes / listed_bytes.
-- column worst_op_name: op_name (else instruction) of the buffer with the most padding, the first listed of equals.
-- column worst_shape: Its shape with layout (the tiling explains the padding).
-- column worst_padding_bytes: Its padding.
-- column hlo_temp_padded_bytes: The `HLO temp ... Padded (X)` total, where printed.
-- column hlo_temp_unpadded_bytes: The `Unpadded (X)` total, where printed.
-- column hlo_temp_padding_bytes: Their difference: padding over all HLO temps, listed or not.
-- note: Only events whose message prints unpadded sizes (the TPU forms); figures are rounded as printed.
-- example: bufferhouse query oom-padding
WITH chosen AS (
  SELECT *
  FROM oom_events
  WHERE
    $label IS NULL
    OR event_id IN (
      SELECT event_id FROM oom_labels WHERE key || '=' || value = $label
    )
),
ranked AS (
  SELECT
    event_id, size_bytes, unpadded_bytes, padding_bytes, shape,
    coalesce(op_name, instruction) AS name,
    row_number() OVER (
      PARTITION BY event_id ORDER BY padding_bytes DESC NULLS LAST, rank
    ) AS nth
  FROM oom_buffers
  WHERE
    unpadded_bytes IS NOT NULL
    AND event_id IN (SELECT event_id FROM chosen)
),
listed AS (
  SELECT
    event_id,
    sum(size_bytes) AS listed_bytes,
    sum(unpadded_bytes) AS listed_unpadded_bytes,
    sum(padding_bytes) AS listed_padding_bytes,
    min(CASE WHEN nth = 1 THEN name END) AS worst_op_name,
    min(CASE WHEN nth = 1 THEN shape END) AS worst_shape,
    max(padding_bytes) AS worst_padding_bytes
  FROM ranked
  GROUP BY event_id
)
SELECT
  e.event_id,
  e.path,
  e.line,
  e.program_name,
  e.memory_space,
  l.listed_bytes,
  l.listed_unpadded_bytes,
  l.listed_padding_bytes,
  round(l.listed_padding_bytes / l.listed_bytes, 4) AS padding_share,
  l.worst_op_name,
  l.worst_shape,
  l.worst_padding_bytes,
  e.padded_bytes AS hlo_temp_padded_bytes,
  e.unpadded_bytes AS hlo_temp_unpadded_bytes,
  e.padded_bytes - e.unpadded_bytes AS hlo_temp_padding_bytes
FROM chosen AS e
LEFT JOIN listed AS l
  ON l.event_id = e.event_id
WHERE l.event_id IS NOT NULL OR e.padded_bytes IS NOT NULL
ORDER BY l.listed_padding_bytes DESC NULLS LAST, e.path, e.line
