-- Generated from exporters/sql/source/unknown_operations.sql by exporters/sql/generate.py: edit the source, then run it.
-- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
-- data and compares every number with `analyze --format json`; the Trino SQL of
-- exporters/sql/duckdb/unknown_operations.sql. Reads the views shadow_steps and shadow_reconciles (whole
-- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
-- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
--
-- Step rows of one plan version naming an operation the plan does not have:
-- `plans[].unknown_operations` of `analyze --format json` (such rows count nowhere else).
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM (VALUES {plan_operations}) AS t(operation, depends_on)
)
SELECT '{plan}' AS plan, operation, count(*) AS step_rows
FROM shadow_steps
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation NOT IN (SELECT operation FROM plan_operations)
GROUP BY operation
ORDER BY operation;
