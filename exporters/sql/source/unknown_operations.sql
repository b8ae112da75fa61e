@@ The source of duckdb/unknown_operations.sql, spark/unknown_operations.sql and trino/unknown_operations.sql (exporters/sql/generate.py explains the
@@ @-lines and the three dialect spellings): edit it here, then run python3 exporters/sql/generate.py.
@spark -- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
@spark -- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
@spark -- exporters/sql/duckdb/unknown_operations.sql, for Spark 3.4 or later. Reads the views shadow_steps and
@spark -- shadow_reconciles (whole parts only) declared by exporters/sql/spark/tables.sql, whose `file` is
@spark -- a row's file. Placeholders as there, except {dir}, which only tables.sql uses.
@trino -- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
@trino -- data and compares every number with `analyze --format json`; the Trino SQL of
@trino -- exporters/sql/duckdb/unknown_operations.sql. Reads the views shadow_steps and shadow_reconciles (whole
@trino -- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
@trino -- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
@spark,trino --
-- Step rows of one plan version naming an operation the plan does not have:
-- `plans[].unknown_operations` of `analyze --format json` (such rows count nowhere else).
@duckdb -- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM PLAN_VALUES AS t(operation, depends_on)
)
SELECT '{plan}' AS plan, operation, count(*) AS step_rows
@duckdb FROM (SELECT * EXCLUDE (filename) FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
@duckdb           -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
@duckdb           WHERE replace(filename, '/table=steps/', '/table=reconciles/')
@duckdb                 IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
@spark,trino FROM shadow_steps
WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
  AND operation NOT IN (SELECT operation FROM plan_operations)
GROUP BY operation
ORDER BY operation;
