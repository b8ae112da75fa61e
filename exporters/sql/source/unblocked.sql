@@ The source of duckdb/unblocked.sql, spark/unblocked.sql and trino/unblocked.sql (exporters/sql/generate.py explains the
@@ @-lines and the three dialect spellings): edit it here, then run python3 exporters/sql/generate.py.
@spark -- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
@spark -- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
@spark -- exporters/sql/duckdb/unblocked.sql, for Spark 3.4 or later. Reads the views shadow_steps and
@spark -- shadow_reconciles (whole parts only) declared by exporters/sql/spark/tables.sql, whose `file` is
@spark -- a row's file. Placeholders as there, except {dir}, which only tables.sql uses.
@trino -- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
@trino -- data and compares every number with `analyze --format json`; the Trino SQL of
@trino -- exporters/sql/duckdb/unblocked.sql. Reads the views shadow_steps and shadow_reconciles (whole
@trino -- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
@trino -- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
@spark,trino --
-- The unblocked matrix of one plan version: `plans[].unblocked[]` of `analyze --format json`.
-- Each candidate step executed in dry-run, that did something (not 'idle'), of an operation the
-- control had in that reconcile (it has a step of it: its code path runs it) and did not run for
-- real (its first step of it is not 'real'), by the control's first failure (`first_failure`,
-- any operation of the plan, the legacy path's own too; null when the control failed nowhere):
-- how often (`unblocked`) and how often it did not fail there (`succeeded`: dry-run steps that
-- did something are only ever 'succeeded' or 'failed'). An operation with `only: phased` that the
-- control does not have (in shadow mode) is never unblocked, nor one of {legacy_only}. The sum of
-- `unblocked` is the sum of the operations' dry-run unblocked steps (operations.sql:
-- unblocked - unblocked_not_simulated).
@duckdb -- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations}, {legacy_only} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM PLAN_VALUES AS t(operation, depends_on)
),
steps AS (
@duckdb     SELECT filename AS file, reconcile_id,
@spark,trino     SELECT file, reconcile_id,
           coalesce(policy = 'control', false) AS control,
           seq, operation, execution, outcome,
           execution IN ('real', 'dry-run') AS executed,
           outcome = 'failed' AS failed
@duckdb     FROM (SELECT * FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
@duckdb           -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
@duckdb           WHERE replace(filename, '/table=steps/', '/table=reconciles/')
@duckdb                 IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
@spark,trino     FROM shadow_steps
    WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
      AND operation IN (SELECT operation FROM plan_operations)
),
ordered AS (
    SELECT *,
           coalesce(sum(CASE WHEN failed THEN 1 ELSE 0 END) OVER (
               PARTITION BY file, reconcile_id, control ORDER BY seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS failures_before
    FROM steps
),
first_failures AS (
    SELECT file, reconcile_id, operation AS first_failure
    FROM ordered
    WHERE control AND failed AND failures_before = 0
),
-- The control's first step of each operation it had (its code path has the operation).
control_first AS (
    SELECT file, reconcile_id, operation, execution
    FROM (SELECT *, row_number() OVER (PARTITION BY file, reconcile_id, operation ORDER BY seq) AS n
          FROM steps WHERE control)
    WHERE n = 1
)
SELECT '{plan}' AS plan,
       f.first_failure,
       c.operation,
       count(*) AS unblocked,
       COUNT_IF(NOT c.failed) AS succeeded
FROM steps c
JOIN control_first e ON e.file = c.file AND e.reconcile_id = c.reconcile_id
                    AND e.operation = c.operation
LEFT JOIN first_failures f ON f.file = c.file AND f.reconcile_id = c.reconcile_id
WHERE NOT c.control AND c.execution = 'dry-run'
  -- a step that had nothing to do is not one the candidate unblocked
  AND c.outcome <> 'idle'
  AND e.execution <> 'real'
  AND c.operation NOT IN ({legacy_only})
GROUP BY f.first_failure, c.operation
ORDER BY f.first_failure, c.operation;
