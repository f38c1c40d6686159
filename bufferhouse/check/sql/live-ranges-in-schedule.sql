-- name: live-ranges-in-schedule
-- description: Live ranges that end before they start or leave the module's schedule.
-- column module_id: Module.
-- column instruction: The value's instruction.
-- column shape_index: Its ShapeIndex.
-- column start_time: First step.
-- column end_time: Last step.
-- column schedule_length: The module's schedule length.
SELECT
  lr.module_id,
  lr.instruction,
  lr.shape_index,
  lr.start_time,
  lr.end_time,
  m.schedule_length
FROM live_ranges AS lr
JOIN modules AS m USING (module_id)
WHERE
  lr.end_time < lr.start_time
  OR lr.start_time < 0
  OR lr.end_time > m.schedule_length
ORDER BY 1, 2, 3
