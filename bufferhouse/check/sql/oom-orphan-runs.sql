-- name: oom-orphan-runs
-- description: OOM events loaded by a run that is not in runs.
-- column event_id: The event.
-- column run_id: The run it names.
SELECT event_id, run_id
FROM oom_events
WHERE run_id IS NULL OR run_id NOT IN (SELECT run_id FROM runs)
ORDER BY 1
