-- Generated from exporters/sql/source/writes.sql by exporters/sql/generate.py: edit the source, then run it.
-- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode (Spark 4.3) on
-- simulate's data and compares every number with `analyze --format json`; the Spark SQL of
-- exporters/sql/duckdb/writes.sql, for Spark 3.4 or later. Reads the view shadow_writes (whole
-- parts only) declared by exporters/sql/spark/tables.sql. Placeholders as there, except {dir},
-- which only tables.sql uses.
--
-- The write differences of one plan version: `plans[].writes[]` of `analyze --format json`
-- (src/analyze/writes.rs `count_writes`), from the `writes` table (docs/parquet.md): per
-- operation and kind of difference (operation, kind, subresource, control, candidate, intended),
-- the reconciled objects it appeared in and its rows. The JSON's bounded lists (`names`,
-- `other_names`, `fields`, `other_fields`: at most 8 names and 16 fields, which ones depending on
-- the order the files are read in) and its sentence are not computed here.
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
-- Whole parts only, as analyze reads them (the view shadow_writes): a writes file counts when the
-- reconciles and steps files of its part (the same partition and name) exist; a part written
-- before the table existed has no writes file and no difference. Every rotation writes a writes
-- file, with no rows when nothing was written differently (such a file is read as no row).
WITH plan_operations AS (
    SELECT * FROM VALUES {plan_operations} AS t(operation, depends_on)
),
writes AS (
    SELECT cluster || '/' || kind || '/' || coalesce(namespace, '') || '/' || name AS object,
           operation, object_kind, object_subresource, control_action, candidate_action, intended
    FROM shadow_writes
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
