-- name: compile_labels
-- description: The labels of each compile: a label any of its modules (forms) carries, as `key=value`, with the module that stands for the compile.
-- column primary_module_id: The module that stands for the compile (compile_modules.primary_module_id).
-- column key_value: A label of one of its modules, `key=value`.
SELECT DISTINCT
  c.primary_module_id,
  l.key || '=' || l.value AS key_value
FROM compile_modules AS c
JOIN labels AS l
  ON l.module_id = c.module_id
