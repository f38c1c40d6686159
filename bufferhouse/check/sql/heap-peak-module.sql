-- name: heap-peak-module
-- description: Modules whose heap_peak_bytes differs from their color-0 heap_peaks row.
-- column module_id: Module.
-- column module_peak: modules.heap_peak_bytes.
-- column color_peak: heap_peaks.heap_peak_bytes of color 0.
SELECT
  m.module_id,
  m.heap_peak_bytes AS module_peak,
  h.heap_peak_bytes AS color_peak
FROM modules AS m
LEFT JOIN heap_peaks AS h
  ON h.module_id = m.module_id AND h.color = 0
WHERE m.heap_peak_bytes IS DISTINCT FROM h.heap_peak_bytes
ORDER BY 1
