-- name: duplicate-content
-- description: Content hashes loaded more than once (a module is loaded once and only labelled after).
-- column content_hash: The module identity.
-- column n: How many modules carry it.
SELECT content_hash, count(*) AS n
FROM modules
GROUP BY 1
HAVING count(*) > 1
ORDER BY 1
