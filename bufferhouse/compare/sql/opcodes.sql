-- name: diff-opcodes
-- description: Each module's instruction multiset: how many defining instructions of each opcode it has.
-- param ids BIGINT[] = NULL: The modules (modules.module_id).
-- column module_id: Module.
-- column opcode: HLO opcode (`?` when not parsed).
-- column instructions: Instructions with that opcode.
SELECT
  module_id,
  coalesce(opcode, '?') AS opcode,
  count(*) AS instructions
FROM instructions
WHERE module_id IN (SELECT unnest($ids))
GROUP BY module_id, coalesce(opcode, '?')
ORDER BY module_id, opcode
