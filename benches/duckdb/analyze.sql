-- The analyzer's counts in DuckDB SQL, over the `steps` table of a dataset directory ({dir}):
-- executions and failures per operation and error class, the control's first failures, and the
-- ordering pairs (Y after X, X the only failure before Y) with each operation's baseline (nothing
-- failed before it). Used by benches/parquet.rs to time DuckDB against `analyze` on the same files.
WITH steps AS (
    SELECT reconcile_id, policy, seq, operation, execution, outcome, error_class
    FROM read_parquet('{dir}/table=steps/**/*.parquet')
    WHERE plan = 'hostedcluster'
),
ordered AS (
    SELECT *,
        coalesce(sum(CASE WHEN outcome = 'failed' THEN 1 ELSE 0 END) OVER w, 0) AS failures_before,
        last_value(CASE WHEN outcome = 'failed' THEN operation END IGNORE NULLS) OVER w AS failed_before
    FROM steps
    WINDOW w AS (PARTITION BY reconcile_id, policy ORDER BY seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
per_operation AS (
    SELECT operation, error_class,
        count(*) FILTER (WHERE execution = 'real') AS executions_real,
        count(*) FILTER (WHERE execution = 'dry-run') AS executions_dry_run,
        count(*) FILTER (WHERE execution IN ('real', 'dry-run') AND outcome = 'failed') AS failures
    FROM ordered GROUP BY ALL
),
first_failures AS (
    SELECT operation, count(*) AS n FROM ordered
    WHERE policy = 'control' AND outcome = 'failed' AND failures_before = 0 GROUP BY ALL
),
pairs AS (
    SELECT failed_before AS failed, operation AS later, count(*) AS runs,
        count(*) FILTER (WHERE outcome = 'failed') AS failures
    FROM ordered
    WHERE execution IN ('real', 'dry-run') AND failures_before = 1 GROUP BY ALL
),
baselines AS (
    SELECT operation, count(*) AS runs, count(*) FILTER (WHERE outcome = 'failed') AS failures
    FROM ordered
    WHERE execution IN ('real', 'dry-run') AND failures_before = 0 GROUP BY ALL
)
SELECT (SELECT count(*) FROM per_operation) AS operations,
       (SELECT count(*) FROM first_failures) AS first_failures,
       (SELECT count(*) FROM pairs) AS pairs,
       (SELECT count(*) FROM baselines) AS baselines
