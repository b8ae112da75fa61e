-- Generated from exporters/sql/source/unknown_operations.sql by exporters/sql/generate.py: edit the source, then run it.
-- Step rows of one plan version naming an operation the plan does not have:
-- `plans[].unknown_operations` of `analyze --format json` (such rows count nowhere else).
-- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM (VALUES {plan_operations}) AS t(operation, depends_on)
)
SELECT '{plan}' AS plan, operation, count(*) AS step_rows
FROM (SELECT * EXCLUDE (filename) FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
          -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
          WHERE replace(filename, '/table=steps/', '/table=reconciles/')
                IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation NOT IN (SELECT operation FROM plan_operations)
GROUP BY operation
ORDER BY operation;
