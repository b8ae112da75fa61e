-- UNTESTED: declares the two tables of a shadow-reconciler Parquet dataset (docs/parquet.md) for the
-- Spark SQL queries of this directory (Spark 3.4 or later), which are translations of the tested
-- DuckDB files in exporters/sql/duckdb/.
--
-- Placeholder: {dir}, the dataset directory as Spark addresses it (s3a://bucket/shadow, hdfs://...,
-- file:///data/shadow). The layout is hive-style: {dir}/table=steps/date=YYYY-MM-DD/hour=HH/*.parquet;
-- writers' temporary files are hidden (.part-*.tmp) and Spark skips them.
--
-- uint32 columns (seq, phase, conflicts, guard_refusals, dry_run_requests) are read as BIGINT.
-- New date/hour partitions are seen after `MSCK REPAIR TABLE` (or ALTER TABLE ... RECOVER PARTITIONS).
-- Alternative without a catalog: replace `shadow_steps` in the queries by
-- parquet.`{dir}/table=steps` (partition discovery is automatic there), or on Databricks by
-- read_files('{dir}/table=steps', format => 'parquet').

CREATE TABLE IF NOT EXISTS shadow_steps (
    `time` TIMESTAMP,
    reconcile_id STRING,
    plan STRING,
    plan_hash STRING,
    mode STRING,
    kind STRING,
    namespace STRING,
    name STRING,
    policy STRING,
    seq BIGINT,
    operation STRING,
    phase BIGINT,
    category STRING,
    execution STRING,
    outcome STRING,
    error_class STRING,
    message STRING,
    blocked_by ARRAY<STRING>,
    offset_us BIGINT,
    duration_us BIGINT,
    conflicts BIGINT,
    conflict_resolution STRING,
    `date` STRING,
    `hour` STRING
)
USING parquet
PARTITIONED BY (`date`, `hour`)
LOCATION '{dir}/table=steps';

MSCK REPAIR TABLE shadow_steps;

CREATE TABLE IF NOT EXISTS shadow_reconciles (
    `time` TIMESTAMP,
    reconcile_id STRING,
    trace_id STRING,
    plan STRING,
    plan_hash STRING,
    mode STRING,
    kind STRING,
    namespace STRING,
    name STRING,
    uid STRING,
    duration_us BIGINT,
    control_first_failure STRING,
    control_error STRING,
    candidate_error STRING,
    unblocked ARRAY<STRING>,
    newly_blocked ARRAY<STRING>,
    changed ARRAY<STRING>,
    guard_refusals BIGINT,
    dry_run_requests BIGINT,
    `date` STRING,
    `hour` STRING
)
USING parquet
PARTITIONED BY (`date`, `hour`)
LOCATION '{dir}/table=reconciles';

MSCK REPAIR TABLE shadow_reconciles;
