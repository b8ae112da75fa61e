@@ The source of duckdb/failures_by_class.sql, spark/failures_by_class.sql and trino/failures_by_class.sql (exporters/sql/generate.py explains the
@@ @-lines and the three dialect spellings): edit it here, then run python3 exporters/sql/generate.py.
@spark -- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
@spark -- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
@spark -- exporters/sql/duckdb/failures_by_class.sql, for Spark 3.4 or later. Reads the views shadow_steps and
@spark -- shadow_reconciles (whole parts only) declared by exporters/sql/spark/tables.sql, whose `file` is
@spark -- a row's file. Placeholders as there, except {dir}, which only tables.sql uses.
@trino -- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
@trino -- data and compares every number with `analyze --format json`; the Trino SQL of
@trino -- exporters/sql/duckdb/failures_by_class.sql. Reads the views shadow_steps and shadow_reconciles (whole
@trino -- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
@trino -- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
@spark,trino --
-- Failures per operation and error class of one plan version: `plans[].operations[].failures_by_class`
-- of `analyze --format json` (only classes that occurred are listed there, and here), for every
-- operation of the plan.
@duckdb -- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
--
-- A failure is an executed step (execution 'real' or 'dry-run') with outcome 'failed'. A failure
-- whose error_class is null or not one of the eleven classes is counted in `failures`
-- (operations.sql) but under no class, as in the analyzer.
WITH plan_operations AS (
    SELECT * FROM PLAN_VALUES AS t(operation, depends_on)
)
SELECT '{plan}' AS plan, operation, error_class, count(*) AS failures
@duckdb FROM (SELECT * EXCLUDE (filename) FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
@duckdb           -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
@duckdb           WHERE replace(filename, '/table=steps/', '/table=reconciles/')
@duckdb                 IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
@spark,trino FROM shadow_steps
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation IN (SELECT operation FROM plan_operations)
  AND execution IN ('real', 'dry-run') AND outcome = 'failed'
  AND error_class IN ('conflict', 'already-exists', 'not-found', 'forbidden', 'invalid',
                      'throttled', 'server', 'transport', 'timeout', 'precondition', 'internal')
GROUP BY operation, error_class
ORDER BY operation, error_class;
