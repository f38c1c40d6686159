-- name: peak-list-members
-- description: Values live at the printed logical peak time but not in the printed peak list, and printed ones not live then.
-- column module_id: Module.
-- column side: 'live at the peak time but not printed' or 'printed but not live at the peak time'.
-- column instruction: The value's instruction.
-- column shape_index: Its ShapeIndex.
-- note: Only eras that print the ShapeIndex in the peak list (2025-04+) identify each value, so only their modules are checked.
WITH checked AS (
  SELECT module_id, logical_peak_time
  FROM modules AS m
  WHERE
    logical_peak_time IS NOT NULL
    AND EXISTS (SELECT 1 FROM peak_values AS p WHERE p.module_id = m.module_id)
    AND NOT EXISTS (
      SELECT 1
      FROM peak_values AS p
      WHERE p.module_id = m.module_id AND p.shape_index IS NULL
    )
),
live AS (
  SELECT lr.module_id, lr.instruction, lr.shape_index
  FROM live_ranges AS lr
  JOIN checked AS c USING (module_id)
  WHERE bh_live_at(c.logical_peak_time, lr.start_time, lr.end_time)
),
printed AS (
  SELECT p.module_id, p.instruction, p.shape_index
  FROM peak_values AS p
  JOIN checked AS c USING (module_id)
)
SELECT
  module_id,
  'live at the peak time but not printed' AS side,
  instruction,
  shape_index
FROM (SELECT * FROM live EXCEPT ALL SELECT * FROM printed)
UNION ALL
SELECT module_id, 'printed but not live at the peak time', instruction, shape_index
FROM (SELECT * FROM printed EXCEPT ALL SELECT * FROM live)
ORDER BY 1, 3, 4
