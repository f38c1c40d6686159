-- name: orphan-runs
-- description: Modules loaded by a run that is not in runs.
-- column module_id: Module.
-- column run_id: The run it names.
SELECT module_id, run_id
FROM modules
WHERE run_id IS NULL OR run_id NOT IN (SELECT run_id FROM runs)
ORDER BY 1
