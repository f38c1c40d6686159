-- name: schedule-length
-- description: Modules whose schedule_length differs from the steps of their InstructionSequence.
-- column module_id: Module.
-- column schedule_length: The module's schedule length.
-- column steps: Rows of sequence.
SELECT m.module_id, m.schedule_length, count(s.module_id) AS steps
FROM modules AS m
LEFT JOIN sequence AS s USING (module_id)
WHERE m.schedule_length IS NOT NULL
GROUP BY m.module_id, m.schedule_length
HAVING m.schedule_length <> count(s.module_id)
ORDER BY 1
