-- check: heap trace
-- description: A trace event's buffer size and the bytes in use after it are not negative.
-- column a: The trace index.
-- column b: The event index.
SELECT
  module_id,
  trace_index AS a,
  event_index AS b,
  'trace ' || trace_index || ' event ' || event_index || ': ' || CASE
    WHEN size < 0 THEN 'buffer ' || value_id || ' has size ' || size || ', which is negative'
    ELSE 'bytes in use ' || heap_bytes || ' is negative'
  END AS problem
FROM heap_events
WHERE module_id BETWEEN $lo AND $hi AND (size < 0 OR heap_bytes < 0)
ORDER BY 1, 2, 3
