-- name: heap-peaks-colors
-- description: heap_peaks rows that disagree with the allocations of their color, and colors with allocations but no heap_peaks row.
-- column module_id: Module.
-- column color: Memory space.
-- column what: What disagrees, with both figures.
WITH a AS (
  SELECT
    module_id,
    color,
    sum(size) AS total,
    sum(size) FILTER (WHERE category <> 'temp') AS indefinite,
    sum(size) FILTER (WHERE category = 'temp') AS temp
  FROM allocations
  GROUP BY ALL
),
h AS (
  SELECT
    h.*,
    coalesce(a.total, 0) AS a_total,
    coalesce(a.indefinite, 0) AS a_indefinite,
    coalesce(a.temp, 0) AS a_temp
  FROM heap_peaks AS h
  LEFT JOIN a USING (module_id, color)
)
SELECT
  module_id,
  color,
  'total_bytes ' || total_bytes
  || ' but the allocations of this color add up to ' || a_total AS what
FROM h
WHERE total_bytes <> a_total
UNION ALL
SELECT
  module_id,
  color,
  'indefinite_bytes ' || indefinite_bytes
  || ' but the non-temp allocations add up to ' || a_indefinite
FROM h
WHERE indefinite_bytes <> a_indefinite
UNION ALL
SELECT
  module_id,
  color,
  'temp_allocation_bytes ' || temp_allocation_bytes
  || ' but the temp allocations add up to ' || a_temp
FROM h
WHERE temp_allocation_bytes <> a_temp
UNION ALL
SELECT
  module_id,
  color,
  'temp_peak_bytes ' || temp_peak_bytes
  || ' exceeds the temp allocations ' || temp_allocation_bytes
FROM h
WHERE temp_peak_bytes > temp_allocation_bytes OR temp_peak_bytes < 0
UNION ALL
SELECT
  module_id,
  color,
  'heap_peak_bytes ' || heap_peak_bytes || ' is not indefinite + temp peak'
FROM h
WHERE heap_peak_bytes IS DISTINCT FROM indefinite_bytes + temp_peak_bytes
UNION ALL
SELECT a.module_id, a.color, 'allocations of this color but no heap_peaks row'
FROM a
ANTI JOIN heap_peaks AS h USING (module_id, color)
ORDER BY 1, 2, 3
