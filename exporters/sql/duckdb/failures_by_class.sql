-- Generated from exporters/sql/source/failures_by_class.sql by exporters/sql/generate.py: edit the source, then run it.
-- Failures per operation and error class of one plan version: `plans[].operations[].failures_by_class`
-- of `analyze --format json` (only classes that occurred are listed there, and here), for every
-- operation of the plan.
-- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
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
FROM (SELECT * EXCLUDE (filename) FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
          -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
          WHERE replace(filename, '/table=steps/', '/table=reconciles/')
                IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation IN (SELECT operation FROM plan_operations)
  AND execution IN ('real', 'dry-run') AND outcome = 'failed'
  AND error_class IN ('conflict', 'already-exists', 'not-found', 'forbidden', 'invalid',
                      'throttled', 'server', 'transport', 'timeout', 'precondition', 'internal')
GROUP BY operation, error_class
ORDER BY operation, error_class;
