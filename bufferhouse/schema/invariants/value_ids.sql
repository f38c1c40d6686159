-- check: values well formed
-- description: A value id names one value of its module.
-- column a: The value id.
-- column b: How many values carry it.
SELECT
  module_id,
  value_id AS a,
  count(*) AS b,
  'value id ' || value_id || ' is listed ' || count(*) || ' times' AS problem
FROM hlo_values
WHERE module_id BETWEEN $lo AND $hi
GROUP BY module_id, value_id
HAVING count(*) > 1
ORDER BY 1, 2
