-- check: heap trace
-- description: The buffers of one heap-simulator trace are of one memory space (color).
-- column a: The trace index.
-- column b: The second color its buffers have (the lowest is the first).
-- XLA runs one heap simulation per color (BufferAssigner::
-- AssignBuffersWithSequentialOrdering splits the buffers with SplitBuffersByColor) and
-- memory-space assignment gives one trace per preset color (AssignPresetBuffers), so
-- every buffer a trace names has the trace's color. The trace's buffer_allocation_index
-- is not checked: it is the index its allocation had before CombineTempAllocations
-- renumbered the allocations (docs/proto-input.md), and may name none of them.
SELECT
  e.module_id,
  e.trace_index AS a,
  MAX(v.color) AS b,
  'trace ' || e.trace_index || ' holds buffers of colors ' || MIN(v.color) || ' and '
    || MAX(v.color) || ', where a trace is of one memory space' AS problem
FROM heap_events AS e
JOIN hlo_values AS v ON v.module_id = e.module_id AND v.value_id = e.value_id
WHERE e.module_id BETWEEN $lo AND $hi
GROUP BY e.module_id, e.trace_index
HAVING MIN(v.color) <> MAX(v.color)
ORDER BY 1, 2
