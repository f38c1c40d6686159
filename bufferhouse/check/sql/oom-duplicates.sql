-- name: oom-duplicates
-- description: An event_hash or event_id held by more than one OOM event (an event is loaded once, only labelled after).
-- column what: `event_hash H` or `event_id N`.
-- column n: How many events hold it.
SELECT 'event_hash ' || event_hash AS what, count(*) AS n
FROM oom_events
GROUP BY event_hash
HAVING count(*) > 1
UNION ALL
SELECT 'event_id ' || event_id AS what, count(*) AS n
FROM oom_events
GROUP BY event_id
HAVING count(*) > 1
ORDER BY 1
