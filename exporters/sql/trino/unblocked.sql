-- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
-- data and compares every number with `analyze --format json`; the Trino SQL of
-- exporters/sql/duckdb/unblocked.sql. Reads the views shadow_steps and shadow_reconciles (whole
-- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
-- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
--
-- The unblocked matrix of one plan version: `plans[].unblocked[]` of `analyze --format json`.
-- In reconciles where the control failed (first at `first_failure`), each candidate step executed
-- in dry-run whose operation the control did not execute (real or dry-run) in that reconcile:
-- how often (`unblocked`) and how often it did not fail there (`succeeded`: the analyzer counts
-- every outcome other than 'failed' as succeeded here; dry-run steps are only ever 'succeeded'
-- or 'failed').
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
WITH plan_operations AS (
    SELECT * FROM (VALUES {plan_operations}) AS t(operation, depends_on)
),
steps AS (
    SELECT file, reconcile_id,
           coalesce(policy = 'control', false) AS control,
           seq, operation, execution, outcome,
           execution IN ('real', 'dry-run') AS executed,
           outcome = 'failed' AS failed
    FROM shadow_steps
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
control_executed AS (
    SELECT DISTINCT file, reconcile_id, operation FROM steps WHERE control AND executed
)
SELECT '{plan}' AS plan,
       f.first_failure,
       c.operation,
       count(*) AS unblocked,
       count_if(NOT c.failed) AS succeeded
FROM first_failures f
JOIN steps c ON c.file = f.file AND c.reconcile_id = f.reconcile_id
            AND NOT c.control AND c.execution = 'dry-run'
LEFT JOIN control_executed e ON e.file = c.file AND e.reconcile_id = c.reconcile_id
                            AND e.operation = c.operation
WHERE e.operation IS NULL
GROUP BY f.first_failure, c.operation
ORDER BY f.first_failure, c.operation;
