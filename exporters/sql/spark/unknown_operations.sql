-- UNTESTED translation of exporters/sql/duckdb/unknown_operations.sql (which is tested against the analyzer)
-- to Spark SQL 3.4 or later: reads the tables shadow_steps and shadow_reconciles declared by
-- exporters/sql/spark/tables.sql; the file of a row is _metadata.file_path. Placeholders as
-- there, except {dir}, which only tables.sql uses.
--
-- Step rows of one plan version naming an operation the plan does not have:
-- `plans[].unknown_operations` of `analyze --format json` (such rows count nowhere else).
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM VALUES {plan_operations} AS t(operation, depends_on)
)
SELECT '{plan}' AS plan, operation, count(*) AS step_rows
FROM shadow_steps
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation NOT IN (SELECT operation FROM plan_operations)
GROUP BY operation
ORDER BY operation;
