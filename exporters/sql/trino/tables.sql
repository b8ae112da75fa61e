-- Tested: tests/python/check_sql.py --engine trino declares the tables with this file in a real Trino
-- (476, the server tarball from Maven Central, on Java 25; a hive catalog on the local file system
-- with a file metastore) and runs every query of this directory on simulate's data. Declares the
-- three tables of a shadow-reconciler Parquet dataset (docs/parquet.md: steps, reconciles and
-- writes) in a Trino hive catalog, and the views of their whole parts that the queries read.
--
-- Placeholders: {schema}, the hive schema to create the tables and views in (the queries name them
-- without a schema: run them with that catalog and schema as the session's); {dir}, the dataset
-- directory as the catalog addresses it (s3://bucket/shadow, gs://..., or local:///data/shadow with
-- fs.native-local.enabled). The layout is hive-style:
-- {dir}/table=steps/cluster=NAME/date=YYYY-MM-DD/hour=HH/*.parquet; writers' temporary files are
-- hidden (.part-*.tmp) and the hive connector skips them.
--
-- The catalog needs hive.timestamp-precision=MICROSECONDS: `time` is stored in microseconds, and
-- the analyzer orders an object's runs by it.
-- Columns are matched by name (hive.parquet.use-column-names, the default); uint32 columns (seq,
-- phase, conflicts, guard_refusals, dry_run_requests, fields_total) are read as bigint. The
-- partition columns (cluster, date, hour) come last; `cluster` is also in the files, where the
-- partition's value is the one read. New partitions are seen after another
-- sync_partition_metadata call. Running the file again is safe: the tables are external and
-- declared only if missing, the views replaced.
-- The writes table's location, {dir}/table=writes, must exist: a dataset written before the table
-- existed has none (create the empty directory, or leave out the writes table, its view and
-- writes.sql).

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE IF NOT EXISTS {schema}.shadow_steps_files (
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
    cluster varchar,
    "date" date,
    "hour" integer
)
WITH (
    external_location = '{dir}/table=steps',
    format = 'PARQUET',
    partitioned_by = ARRAY['cluster', 'date', 'hour']
);

CALL system.sync_partition_metadata('{schema}', 'shadow_steps_files', 'FULL');

CREATE TABLE IF NOT EXISTS {schema}.shadow_reconciles_files (
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
    cancelled boolean,
    enforced_groups array(varchar),
    flag_version varchar,
    comparison_skipped varchar,
    cluster varchar,
    "date" date,
    "hour" integer
)
WITH (
    external_location = '{dir}/table=reconciles',
    format = 'PARQUET',
    partitioned_by = ARRAY['cluster', 'date', 'hour']
);

CALL system.sync_partition_metadata('{schema}', 'shadow_reconciles_files', 'FULL');

-- One row per object an operation wrote differently in the candidate's code and the control's.
-- Every rotation writes a file here, with no rows when nothing differed; a part written before
-- the table existed has none.
CREATE TABLE IF NOT EXISTS {schema}.shadow_writes_files (
    "time" timestamp(6),
    reconcile_id varchar,
    plan varchar,
    plan_hash varchar,
    mode varchar,
    kind varchar,
    namespace varchar,
    name varchar,
    operation varchar,
    "only" varchar,
    object_group varchar,
    object_kind varchar,
    object_namespace varchar,
    object_name varchar,
    object_subresource varchar,
    control_verb varchar,
    candidate_verb varchar,
    control_action varchar,
    candidate_action varchar,
    fields array(varchar),
    fields_total bigint,
    intended boolean,
    cluster varchar,
    "date" date,
    "hour" integer
)
WITH (
    external_location = '{dir}/table=writes',
    format = 'PARQUET',
    partitioned_by = ARRAY['cluster', 'date', 'hour']
);

CALL system.sync_partition_metadata('{schema}', 'shadow_writes_files', 'FULL');

-- The whole parts (docs/parquet.md): a file counts only when its sibling of the same name in the
-- other table exists, so that no reader sees half of a rotation; a writes file, when both the
-- reconciles and the steps file of its part exist. `file` is the row's file, which the queries
-- group by.
CREATE OR REPLACE VIEW {schema}.shadow_steps AS
SELECT s.*, s."$path" AS file
FROM {schema}.shadow_steps_files s
WHERE replace(s."$path", '/table=steps/', '/table=reconciles/')
      IN (SELECT DISTINCT "$path" FROM {schema}.shadow_reconciles_files);

CREATE OR REPLACE VIEW {schema}.shadow_reconciles AS
SELECT r.*, r."$path" AS file
FROM {schema}.shadow_reconciles_files r
WHERE replace(r."$path", '/table=reconciles/', '/table=steps/')
      IN (SELECT DISTINCT "$path" FROM {schema}.shadow_steps_files);

CREATE OR REPLACE VIEW {schema}.shadow_writes AS
SELECT w.*, w."$path" AS file
FROM {schema}.shadow_writes_files w
WHERE replace(w."$path", '/table=writes/', '/table=reconciles/')
      IN (SELECT DISTINCT "$path" FROM {schema}.shadow_reconciles_files)
  AND replace(w."$path", '/table=writes/', '/table=steps/')
      IN (SELECT DISTINCT "$path" FROM {schema}.shadow_steps_files);
