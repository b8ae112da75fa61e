-- Generated from exporters/sql/source/unknown_operations.sql by exporters/sql/generate.py: edit the source, then run it.
-- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
-- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
-- exporters/sql/duckdb/unknown_operations.sql, for Spark 3.4 or later. Reads the views shadow_steps and
-- shadow_reconciles (whole parts only) declared by exporters/sql/spark/tables.sql, whose `file` is
-- a row's file. Placeholders as there, except {dir}, which only tables.sql uses.
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
