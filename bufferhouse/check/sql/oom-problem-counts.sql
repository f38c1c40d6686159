-- name: oom-problem-counts
-- description: OOM events whose diagnostics are not the number of problems they recorded.
-- column event_id: The event.
-- column path: Its log.
-- column line: Its first line.
-- column recorded: problem_count of the event.
-- column stored: diagnostics rows naming the event.
SELECT e.event_id, e.path, e.line, e.problem_count AS recorded, count(d.event_id) AS stored
FROM oom_events AS e
LEFT JOIN diagnostics AS d
  ON d.event_id = e.event_id
GROUP BY ALL
HAVING e.problem_count <> count(d.event_id)
ORDER BY 1
