-- check: assignments in bounds
-- description: A value is assigned to one allocation, once.
-- column a: The value id.
-- column b: How many assignments place it.
SELECT
  module_id,
  value_id AS a,
  count(*) AS b,
  'value ' || value_id || ' is assigned ' || count(*) || ' times' AS problem
FROM assignments
WHERE module_id BETWEEN $lo AND $hi
GROUP BY module_id, value_id
HAVING count(*) > 1
ORDER BY 1, 2
