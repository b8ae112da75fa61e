-- UNTESTED: declares the two tables of a shadow-reconciler Parquet dataset (docs/parquet.md) in a
-- Trino hive catalog, for the Trino queries of this directory, which are translations of the
-- tested DuckDB files in exporters/sql/duckdb/.
--
-- Placeholders: {schema}, the hive schema to create the tables in (the queries name them without
-- a schema: run them with that catalog and schema as the session's); {dir}, the dataset directory
-- as the catalog addresses it (s3://bucket/shadow, hdfs://..., or a local path the catalog allows).
-- The layout is hive-style: {dir}/table=steps/date=YYYY-MM-DD/hour=HH/*.parquet; writers' temporary
-- files are hidden (.part-*.tmp) and the hive connector skips them.
--
-- Columns are matched by name (hive.parquet.use-column-names, the default); uint32 columns (seq,
-- phase, conflicts, guard_refusals, dry_run_requests) are read as bigint. Partition columns come
-- last. New date/hour partitions are seen after another sync_partition_metadata call.

CREATE TABLE IF NOT EXISTS {schema}.shadow_steps (
    "time" timestamp(6),
    reconcile_id varchar,
    plan varchar,
    plan_hash varchar,
    mode varchar,
    kind varchar,
    namespace varchar,
    name varchar,
    policy varchar,
    seq bigint,
    operation varchar,
    phase bigint,
    category varchar,
    execution varchar,
    outcome varchar,
    error_class varchar,
    message varchar,
    blocked_by array(varchar),
    offset_us bigint,
    duration_us bigint,
    conflicts bigint,
    conflict_resolution varchar,
    "date" varchar,
    "hour" varchar
)
WITH (
    external_location = '{dir}/table=steps',
    format = 'PARQUET',
    partitioned_by = ARRAY['date', 'hour']
);

CALL system.sync_partition_metadata('{schema}', 'shadow_steps', 'FULL');

CREATE TABLE IF NOT EXISTS {schema}.shadow_reconciles (
    "time" timestamp(6),
    reconcile_id varchar,
    trace_id varchar,
    plan varchar,
    plan_hash varchar,
    mode varchar,
    kind varchar,
    namespace varchar,
    name varchar,
    uid varchar,
    duration_us bigint,
    control_first_failure varchar,
    control_error varchar,
    candidate_error varchar,
    unblocked array(varchar),
    newly_blocked array(varchar),
    changed array(varchar),
    guard_refusals bigint,
    dry_run_requests bigint,
    "date" varchar,
    "hour" varchar
)
WITH (
    external_location = '{dir}/table=reconciles',
    format = 'PARQUET',
    partitioned_by = ARRAY['date', 'hour']
);

CALL system.sync_partition_metadata('{schema}', 'shadow_reconciles', 'FULL');
