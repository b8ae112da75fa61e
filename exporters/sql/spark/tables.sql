-- Tested: tests/python/check_sql.py --engine spark declares the tables with this file in pyspark's
-- local mode (Spark 4.3) and runs every query of this directory on simulate's data. Declares the
-- three tables of a shadow-reconciler Parquet dataset (docs/parquet.md: steps, reconciles and
-- writes) for the Spark SQL queries of this directory, and the views of their whole parts that
-- the queries read.
--
-- Placeholder: {dir}, the dataset directory as Spark addresses it (s3a://bucket/shadow, hdfs://...,
-- file:///data/shadow). The layout is hive-style:
-- {dir}/table=steps/cluster=NAME/date=YYYY-MM-DD/hour=HH/*.parquet (`cluster` is also a column of the files);
-- writers' temporary files are hidden (.part-*.tmp) and Spark skips them.
--
-- Types: uint32 columns (seq, phase, conflicts, guard_refusals, dry_run_requests, fields_total)
-- are read as BIGINT; the partition columns are typed as Spark's own partition inference types
-- them when it reads a directory (spark.read.parquet): `date` DATE, `hour` INT.
-- Time: `time` is an instant (UTC in the files); Spark shows it in the session time zone, and the
-- date/hour partitions are UTC: set spark.sql.session.timeZone=UTC to compare them.
-- New date/hour partitions are seen after `MSCK REPAIR TABLE` (or ALTER TABLE ... RECOVER PARTITIONS).
-- Running the file again (in the same or a new session) is safe: the tables are external (their
-- data stays where it is) and declared only if missing; the views are replaced.

CREATE TABLE IF NOT EXISTS shadow_steps_files (
    `time` TIMESTAMP,
    reconcile_id STRING,
    cluster STRING,
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
    `date` DATE,
    `hour` INT
)
USING parquet
PARTITIONED BY (cluster, `date`, `hour`)
LOCATION '{dir}/table=steps';

MSCK REPAIR TABLE shadow_steps_files;

CREATE TABLE IF NOT EXISTS shadow_reconciles_files (
    `time` TIMESTAMP,
    reconcile_id STRING,
    trace_id STRING,
    cluster STRING,
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
    cancelled BOOLEAN,
    enforced_groups ARRAY<STRING>,
    flag_version STRING,
    comparison_skipped STRING,
    `date` DATE,
    `hour` INT
)
USING parquet
PARTITIONED BY (cluster, `date`, `hour`)
LOCATION '{dir}/table=reconciles';

MSCK REPAIR TABLE shadow_reconciles_files;

-- One row per object an operation wrote differently in the candidate's code and the control's.
-- Every rotation writes a file here, with no rows when nothing differed; a part written before
-- the table existed has none. Its location, {dir}/table=writes, must exist (MSCK REPAIR TABLE
-- fails on a missing one): a dataset written before the table existed has none, create the
-- empty directory.
CREATE TABLE IF NOT EXISTS shadow_writes_files (
    `time` TIMESTAMP,
    reconcile_id STRING,
    cluster STRING,
    plan STRING,
    plan_hash STRING,
    mode STRING,
    kind STRING,
    namespace STRING,
    name STRING,
    operation STRING,
    `only` STRING,
    object_group STRING,
    object_kind STRING,
    object_namespace STRING,
    object_name STRING,
    object_subresource STRING,
    control_verb STRING,
    candidate_verb STRING,
    control_action STRING,
    candidate_action STRING,
    fields ARRAY<STRING>,
    fields_total BIGINT,
    intended BOOLEAN,
    `date` DATE,
    `hour` INT
)
USING parquet
PARTITIONED BY (cluster, `date`, `hour`)
LOCATION '{dir}/table=writes';

MSCK REPAIR TABLE shadow_writes_files;

-- The whole parts (docs/parquet.md): a file counts only when its sibling of the same name in the
-- other table exists, so that no reader sees half of a rotation (a writer that stopped between
-- committing the files); a writes file, when both the reconciles and the steps file of its part
-- exist. `file` is the row's file, which the queries group by.
CREATE OR REPLACE TEMPORARY VIEW shadow_steps AS
SELECT s.*, s._metadata.file_path AS file
FROM shadow_steps_files s
WHERE replace(s._metadata.file_path, '/table=steps/', '/table=reconciles/')
      IN (SELECT DISTINCT _metadata.file_path FROM shadow_reconciles_files);

CREATE OR REPLACE TEMPORARY VIEW shadow_reconciles AS
SELECT r.*, r._metadata.file_path AS file
FROM shadow_reconciles_files r
WHERE replace(r._metadata.file_path, '/table=reconciles/', '/table=steps/')
      IN (SELECT DISTINCT _metadata.file_path FROM shadow_steps_files);

CREATE OR REPLACE TEMPORARY VIEW shadow_writes AS
SELECT w.*, w._metadata.file_path AS file
FROM shadow_writes_files w
WHERE replace(w._metadata.file_path, '/table=writes/', '/table=reconciles/')
      IN (SELECT DISTINCT _metadata.file_path FROM shadow_reconciles_files)
  AND replace(w._metadata.file_path, '/table=writes/', '/table=steps/')
      IN (SELECT DISTINCT _metadata.file_path FROM shadow_steps_files);
