-- name: module_keys
-- description: Every string that selects a module in a query's `module` parameter: its name, file stem, module_id and content-hash prefix (12 hex digits).
-- column module_id: Module (modules.module_id).
-- column key: A name that selects it.
SELECT module_id, module_name AS key
FROM modules
UNION
SELECT module_id, file_stem
FROM modules
UNION
SELECT module_id, CAST(module_id AS VARCHAR)
FROM modules
UNION
SELECT module_id, substr(content_hash, 1, 12)
FROM modules
