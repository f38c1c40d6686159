-- name: diff-labelled
-- description: Modules of a warehouse that carry every one of the given labels (a diff side given as `key=value[,key=value]`).
-- param labels VARCHAR[] = NULL: The labels, each `key=value`.
-- column module_id: A module that carries all of them.
SELECT module_id
FROM labels
WHERE key || '=' || value IN (SELECT unnest($labels))
GROUP BY module_id
HAVING count(DISTINCT key || '=' || value) = len(list_distinct($labels))
ORDER BY module_id
