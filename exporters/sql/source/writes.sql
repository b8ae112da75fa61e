@@ The source of duckdb/writes.sql, spark/writes.sql and trino/writes.sql (exporters/sql/generate.py explains the
@@ @-lines and the three dialect spellings): edit it here, then run python3 exporters/sql/generate.py.
@spark -- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
@spark -- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
@spark -- exporters/sql/duckdb/writes.sql, for Spark 3.4 or later. Reads the view shadow_writes (whole
@spark -- parts only) declared by exporters/sql/spark/tables.sql. Placeholders as there, except {dir},
@spark -- which only tables.sql uses.
@trino -- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
@trino -- data and compares every number with `analyze --format json`; the Trino SQL of
@trino -- exporters/sql/duckdb/writes.sql. Reads the view shadow_writes (whole parts only) declared by
@trino -- exporters/sql/trino/tables.sql. Placeholders as there, except {dir} and {schema}, which only
@trino -- tables.sql uses.
@spark,trino --
-- The write differences of one plan version: `plans[].writes[]` of `analyze --format json`
-- (src/analyze/writes.rs `count_writes`), from the `writes` table (docs/parquet.md): per
-- operation and kind of difference (operation, kind, subresource, control, candidate, intended),
-- the reconciled objects it appeared in and its rows. The JSON's bounded lists (`names`,
-- `other_names`, `fields`, `other_fields`: at most 8 names and 16 fields, which ones depending on
-- the order the files are read in) and its sentence are not computed here.
@duckdb -- Tested: tests/python/check_sql.py runs it and compares every number with `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql. Every
-- operation of the plan counts, those with `only:` included (the legacy loop's own step writes
-- what the phased reconcile never does: a difference of its own). Rows of reconciles in mode
-- `calibrate` (the control's code against itself: the comparison's noise, `plans[].noise[]`)
-- are not the candidate's and are left out.
--
--   operation    the operation whose code wrote differently (rows naming an operation the plan
--                does not have are left out, as the analyzer does)
--   kind         the written object's kind (`object_kind`)
--   subresource  the subresource written (`object_subresource`), null for the object itself
--   control      what the control's code did to it (`control_action`: none, write or delete)
--   candidate    what the candidate's code did (`candidate_action`)
--   intended     whether the plan declares the difference (`intendedDifferences`, or `only`)
--   objects      distinct reconciled objects (cluster/kind/namespace/name of the reconcile, not
--                of the written object: a name in two clusters is two objects)
--   rows         rows: one per written object per reconcile
--
@duckdb -- Whole parts only, as analyze reads them: a writes file counts when the reconciles and steps
@duckdb -- files of its part (the same partition and name) exist; a part written before the table
@duckdb -- existed has no writes file and no difference. Every rotation writes a writes file, with no
@duckdb -- rows when nothing was written differently. A dataset with no writes file at all (written
@duckdb -- before the table existed) has nothing to read: DuckDB then fails with "No files found", and
@duckdb -- the answer is no row.
@spark,trino -- Whole parts only, as analyze reads them (the view shadow_writes): a writes file counts when the
@spark,trino -- reconciles and steps files of its part (the same partition and name) exist; a part written
@spark,trino -- before the table existed has no writes file and no difference. Every rotation writes a writes
@spark,trino -- file, with no rows when nothing was written differently (such a file is read as no row).
WITH plan_operations AS (
    SELECT * FROM PLAN_VALUES AS t(operation, depends_on)
),
writes AS (
    SELECT cluster || '/' || kind || '/' || coalesce(namespace, '') || '/' || name AS object,
           operation, object_kind, object_subresource, control_action, candidate_action, intended
@duckdb     FROM (SELECT * FROM read_parquet('{dir}/table=writes/**/*.parquet', hive_partitioning = true, filename = true)
@duckdb           -- whole parts only (docs/parquet.md): the part's reconciles and steps files exist
@duckdb           WHERE replace(filename, '/table=writes/', '/table=reconciles/')
@duckdb                 IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet'))
@duckdb             AND replace(filename, '/table=writes/', '/table=steps/')
@duckdb                 IN (SELECT file FROM glob('{dir}/table=steps/**/*.parquet')))
@spark,trino     FROM shadow_writes
    WHERE plan = '{plan}' AND plan_hash = '{plan_hash}'
      AND operation IN (SELECT operation FROM plan_operations)
      AND mode <> 'calibrate'
)
SELECT '{plan}' AS plan,
       operation,
       object_kind AS kind,
       object_subresource AS subresource,
       control_action AS control,
       candidate_action AS candidate,
       intended,
       count(DISTINCT object) AS objects,
       count(*) AS rows
FROM writes
GROUP BY operation, object_kind, object_subresource, control_action, candidate_action, intended
ORDER BY operation, kind, subresource, control, candidate, intended;
