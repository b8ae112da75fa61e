@@ The source of duckdb/operations.sql, spark/operations.sql and trino/operations.sql (exporters/sql/generate.py explains the
@@ @-lines and the three dialect spellings): edit it here, then run python3 exporters/sql/generate.py.
@spark -- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
@spark -- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
@spark -- exporters/sql/duckdb/operations.sql, for Spark 3.4 or later. Reads the views shadow_steps and
@spark -- shadow_reconciles (whole parts only) declared by exporters/sql/spark/tables.sql, whose `file` is
@spark -- a row's file. Placeholders as there, except {dir}, which only tables.sql uses.
@trino -- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
@trino -- data and compares every number with `analyze --format json`; the Trino SQL of
@trino -- exporters/sql/duckdb/operations.sql. Reads the views shadow_steps and shadow_reconciles (whole
@trino -- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
@trino -- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
@spark,trino --
-- Per operation of one plan version: the numbers of `analyze --format json` under
-- `plans[].operations[]` (src/analyze/scan.rs `count_run` and `finish`), for every operation of
-- the plan, each with the code path it alone belongs to (`only`: legacy, phased, or null).
@duckdb -- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders (replaced as text before running; tests/python/check_sql.py does it):
--   {dir}              the dataset directory (holds table=steps/ and table=reconciles/)
--   {plan}             the plan name, e.g. hostedcluster
--   {plan_hash}        the plan's content hash (`plans[].plan_hash`, `plan check`): only rows
--                      recorded under this exact version count, as in the analyzer
--   {plan_operations}  the plan's operations, as VALUES rows ('Operation', 'DependsOn'), one row
--                      per dependsOn entry and ('Operation', '') for an operation without any.
--                      Only the names are used here: step rows naming an operation the plan does
--                      not have are left out, as the analyzer does (see unknown_operations.sql).
--   {legacy_only}      the plan's operations with `only: legacy` (they exist in the legacy loop
--                      alone), as SQL string literals for IN (...): 'ValidConfigurationCondition',
--                      or '' when the plan has none. Their steps count like any other (one may be
--                      a reconcile's first failure); their rows say `only` legacy
--   {phased_only}      the same for `only: phased` (the phased reconcile's alone)
--
-- Definitions (a "run" is the control's or the candidate's steps of one reconcile, in `seq`
-- order; a reconcile is one reconcile_id within one file, since the analyzer counts each file on
-- its own):
--   executions_real / executions_dry_run   steps with execution 'real' / 'dry-run' (a 'reused'
--                                          candidate step is the control's result, not counted)
--   failures             executed steps with outcome 'failed'; failure_rate = failures/executions
--   first_failure        reconciles whose control run's first failed step is this operation
--   blocked_in_control   control steps 'blocked' or 'skipped' whose blocked_by names this
--                        operation, in reconciles where it was the control's first failure
--   blocked_then_run_by_candidate         of those, the candidate's (first) step of the same
--                        operation was a dry run that did something (not 'idle': nothing to do)
--   blocked_then_succeeded_in_candidate   ... and succeeded
--   newly_blocked        candidate steps 'blocked' or 'skipped' of an operation the control
--                        executed (real or dry-run) in the same reconcile
--   unblocked            candidate steps 'dry-run' or 'not-simulated' of an operation the control
--                        had in the same reconcile (it has a step of it: its code path runs it)
--                        and did not run for real (its first step of it is not 'real'); an
--                        operation with `only: phased` that the control does not have (in shadow
--                        mode) is never unblocked, and neither is a step that had nothing to do
--                        (outcome 'idle'). Of those, unblocked_succeeded /
--                        unblocked_failed are dry runs that succeeded / failed,
--                        unblocked_not_simulated the 'not-simulated' ones
--   failures_real / failures_dry_run       failures among the real / dry-run executions
--   failed_objects       distinct objects (cluster/kind/namespace/name: a name in two clusters is two objects) with a step 'failed' 
WITH plan_operations AS (
    SELECT * FROM PLAN_VALUES AS t(operation, depends_on)
),
operations AS (
    SELECT DISTINCT operation FROM plan_operations
),
-- The operations reported: every one of the plan, with the code path it alone belongs to.
reported AS (
    SELECT operation,
           CASE WHEN operation IN ({legacy_only}) THEN 'legacy'
                WHEN operation IN ({phased_only}) THEN 'phased' END AS only
    FROM operations
),
steps AS (
@duckdb     SELECT filename AS file, reconcile_id,
@spark,trino     SELECT file, reconcile_id,
           coalesce(policy = 'control', false) AS control,
           seq, operation, execution, outcome, blocked_by,
           execution IN ('real', 'dry-run') AS executed,
           outcome = 'failed' AS failed,
           outcome IN ('blocked', 'skipped') AS blocked,
           cluster || '/' || kind || '/' || coalesce(namespace, '') || '/' || name AS object
@duckdb     FROM (SELECT * FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
@duckdb           -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
@duckdb           WHERE replace(filename, '/table=steps/', '/table=reconciles/')
@duckdb                 IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))
@spark,trino     FROM shadow_steps
    WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
      AND operation IN (SELECT operation FROM operations)
),
ordered AS (
    SELECT *,
           coalesce(sum(CASE WHEN failed THEN 1 ELSE 0 END) OVER (
               PARTITION BY file, reconcile_id, control ORDER BY seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS failures_before
    FROM steps
),
-- The control's first failure, one row per reconcile that has one.
first_failures AS (
    SELECT file, reconcile_id, operation AS first_failure
    FROM ordered
    WHERE control AND failed AND failures_before = 0
),
-- The candidate's first step of each operation (the analyzer looks at that one).
candidate_first AS (
    SELECT file, reconcile_id, operation, execution, outcome
    FROM (SELECT *, row_number() OVER (PARTITION BY file, reconcile_id, operation ORDER BY seq) AS n
          FROM steps WHERE NOT control)
    WHERE n = 1
),
blocked_by_first AS (
    SELECT f.first_failure AS operation,
           count(*) AS blocked_in_control,
           COUNT_IF(c.execution = 'dry-run' AND c.outcome <> 'idle') AS blocked_then_run,
           COUNT_IF(c.execution = 'dry-run' AND c.outcome = 'succeeded')
               AS blocked_then_succeeded
    FROM first_failures f
    JOIN steps b ON b.file = f.file AND b.reconcile_id = f.reconcile_id
                AND b.control AND b.blocked AND CONTAINS(b.blocked_by, f.first_failure)
    LEFT JOIN candidate_first c ON c.file = b.file AND c.reconcile_id = b.reconcile_id
                               AND c.operation = b.operation
    GROUP BY f.first_failure
),
control_executed AS (
    SELECT DISTINCT file, reconcile_id, operation FROM steps WHERE control AND executed
),
newly_blocked AS (
    SELECT s.operation, count(*) AS newly_blocked
    FROM steps s
    JOIN control_executed e ON e.file = s.file AND e.reconcile_id = s.reconcile_id
                           AND e.operation = s.operation
    WHERE NOT s.control AND s.blocked
    GROUP BY s.operation
),
-- The control's first step of each operation it had (its code path has the operation).
control_first AS (
    SELECT file, reconcile_id, operation, execution
    FROM (SELECT *, row_number() OVER (PARTITION BY file, reconcile_id, operation ORDER BY seq) AS n
          FROM steps WHERE control)
    WHERE n = 1
),
unblocked AS (
    SELECT s.operation,
           count(*) AS unblocked,
           COUNT_IF(s.execution = 'dry-run' AND s.outcome = 'succeeded') AS unblocked_succeeded,
           COUNT_IF(s.execution = 'dry-run' AND s.outcome = 'failed') AS unblocked_failed,
           COUNT_IF(s.execution = 'not-simulated') AS unblocked_not_simulated
    FROM steps s
    JOIN control_first r ON r.file = s.file AND r.reconcile_id = s.reconcile_id
                        AND r.operation = s.operation
    WHERE NOT s.control AND s.execution IN ('dry-run', 'not-simulated') AND r.execution <> 'real'
      -- a step that had nothing to do is not one the candidate unblocked
      AND s.outcome <> 'idle'
    GROUP BY s.operation
),
executions AS (
    SELECT operation,
           COUNT_IF(execution = 'real') AS executions_real,
           COUNT_IF(execution = 'dry-run') AS executions_dry_run,
           COUNT_IF(executed AND failed) AS failures,
           COUNT_IF(execution = 'real' AND failed) AS failures_real,
           COUNT_IF(execution = 'dry-run' AND failed) AS failures_dry_run,
           count(DISTINCT CASE WHEN failed THEN object END) AS failed_objects
    FROM steps
    GROUP BY operation
),
first_failure_counts AS (
    SELECT first_failure AS operation, count(*) AS first_failure
    FROM first_failures
    GROUP BY first_failure
)
SELECT '{plan}' AS plan,
       o.operation,
       o.only,
       coalesce(x.executions_real, 0) + coalesce(x.executions_dry_run, 0) AS executions,
       coalesce(x.executions_real, 0) AS executions_real,
       coalesce(x.executions_dry_run, 0) AS executions_dry_run,
       coalesce(x.failures, 0) AS failures,
       coalesce(x.failures_real, 0) AS failures_real,
       coalesce(x.failures_dry_run, 0) AS failures_dry_run,
       coalesce(x.failed_objects, 0) AS failed_objects,
       CASE WHEN coalesce(x.executions_real, 0) + coalesce(x.executions_dry_run, 0) = 0 THEN 0.0
            ELSE CAST(x.failures AS DOUBLE) / CAST(x.executions_real + x.executions_dry_run AS DOUBLE)
       END AS failure_rate,
       coalesce(ff.first_failure, 0) AS first_failure,
       coalesce(b.blocked_in_control, 0) AS blocked_in_control,
       coalesce(b.blocked_then_run, 0) AS blocked_then_run_by_candidate,
       coalesce(b.blocked_then_succeeded, 0) AS blocked_then_succeeded_in_candidate,
       coalesce(nb.newly_blocked, 0) AS newly_blocked,
       coalesce(u.unblocked, 0) AS unblocked,
       coalesce(u.unblocked_succeeded, 0) AS unblocked_succeeded,
       coalesce(u.unblocked_failed, 0) AS unblocked_failed,
       coalesce(u.unblocked_not_simulated, 0) AS unblocked_not_simulated
FROM reported o
LEFT JOIN executions x ON x.operation = o.operation
LEFT JOIN first_failure_counts ff ON ff.operation = o.operation
LEFT JOIN blocked_by_first b ON b.operation = o.operation
LEFT JOIN newly_blocked nb ON nb.operation = o.operation
LEFT JOIN unblocked u ON u.operation = o.operation
ORDER BY o.operation;
