-- Generated from exporters/sql/source/failures_by_class.sql by exporters/sql/generate.py: edit the source, then run it.
-- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
-- data and compares every number with `analyze --format json`; the Trino SQL of
-- exporters/sql/duckdb/failures_by_class.sql. Reads the views shadow_steps and shadow_reconciles (whole
-- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
-- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
--
-- Failures per operation and error class of one plan version: `plans[].operations[].failures_by_class`
-- of `analyze --format json` (only classes that occurred are listed there, and here), for every
-- operation of the plan.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
--
-- A failure is an executed step (execution 'real' or 'dry-run') with outcome 'failed'. A failure
-- whose error_class is null or not one of the eleven classes is counted in `failures`
-- (operations.sql) but under no class, as in the analyzer.
WITH plan_operations AS (
    SELECT * FROM (VALUES {plan_operations}) AS t(operation, depends_on)
)
SELECT '{plan}' AS plan, operation, error_class, count(*) AS failures
FROM shadow_steps
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation IN (SELECT operation FROM plan_operations)
  AND execution IN ('real', 'dry-run') AND outcome = 'failed'
  AND error_class IN ('conflict', 'already-exists', 'not-found', 'forbidden', 'invalid',
                      'throttled', 'server', 'transport', 'timeout', 'precondition', 'internal')
GROUP BY operation, error_class
ORDER BY operation, error_class;
