-- Generated from exporters/sql/source/unblocked.sql by exporters/sql/generate.py: edit the source, then run it.
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
-- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations}, {legacy_only} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM (VALUES {plan_operations}) AS t(operation, depends_on)
),
steps AS (
    SELECT filename AS file, reconcile_id,
           coalesce(policy = 'control', false) AS control,
           seq, operation, execution, outcome,
           execution IN ('real', 'dry-run') AS executed,
           outcome = 'failed' AS failed
    FROM (SELECT * FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
          -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
          WHERE replace(filename, '/table=steps/', '/table=reconciles/')
                IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
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
       count(*) FILTER (WHERE NOT c.failed) AS succeeded
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
