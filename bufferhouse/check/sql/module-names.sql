-- name: module-names
-- description: Each module's id and file stem, to name the modules in the report.
-- column module_id: Module.
-- column file_stem: Its file stem.
SELECT module_id, file_stem
FROM modules
