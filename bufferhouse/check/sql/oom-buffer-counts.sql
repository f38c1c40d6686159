-- name: oom-buffer-counts
-- description: OOM events whose stored buffers are not the number they list (an event is written whole).
-- column event_id: The event.
-- column path: Its log.
-- column line: Its first line.
-- column listed: buffer_count: the buffers the message listed.
-- column stored: oom_buffers rows of the event.
SELECT e.event_id, e.path, e.line, e.buffer_count AS listed, count(b.event_id) AS stored
FROM oom_events AS e
LEFT JOIN oom_buffers AS b
  ON b.event_id = e.event_id
GROUP BY ALL
HAVING e.buffer_count <> count(b.event_id)
ORDER BY 1
