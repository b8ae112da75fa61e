-- Generated from exporters/sql/source/plan.sql by exporters/sql/generate.py: edit the source, then run it.
-- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's
-- data and compares every number with `analyze --format json`; the Trino SQL of
-- exporters/sql/duckdb/plan.sql. Reads the views shadow_steps and shadow_reconciles (whole
-- parts only) declared by exporters/sql/trino/tables.sql, whose `file` is a row's file.
-- Placeholders as there, except {dir} and {schema}, which only tables.sql uses.
--
-- One row per plan version: `plans[].reconciles`, `cancelled`, `objects`, `guard_refusals` and
-- `other_version_rows` of `analyze --format json`.
--
-- Placeholders: {dir}, {plan}, {plan_hash}, {plan_operations} as in operations.sql.
--
--   reconciles          the larger of the `reconciles` rows of this version that were not cancelled
--                       and the reconciles seen in `steps` (distinct reconcile_id per file, among
--                       step rows of operations the plan has), as in the analyzer
--   cancelled           `reconciles` rows of this version marked `cancelled` (cut short before they
--                       finished; they have no steps); a part written before the column existed
--                       has none
--   objects             distinct objects (cluster/kind/namespace/name: a name in two clusters is two objects) among those step rows
--   guard_refusals      sum of `reconciles.guard_refusals` of this version
--   other_version_rows  rows of both tables with this plan name and another plan_hash
WITH plan_operations AS (
    SELECT * FROM (VALUES {plan_operations}) AS t(operation, depends_on)
),
reconciles AS (
    SELECT plan, plan_hash, guard_refusals, coalesce(cancelled, false) AS cancelled
    FROM shadow_reconciles
    WHERE plan = '{plan}'
),
steps AS (
    SELECT file, reconcile_id, plan_hash, operation,
           cluster || '/' || kind || '/' || coalesce(namespace, '') || '/' || name AS object
    FROM shadow_steps
    WHERE plan = '{plan}'
),
counts AS (
    SELECT
        (SELECT count(*) FROM reconciles WHERE plan_hash = '{plan_hash}' AND NOT cancelled) AS reconcile_rows,
        (SELECT count(*) FROM reconciles WHERE plan_hash = '{plan_hash}' AND cancelled) AS cancelled,
        (SELECT count(*) FROM (SELECT DISTINCT file, reconcile_id FROM steps
                               WHERE plan_hash = '{plan_hash}'
                                 AND operation IN (SELECT operation FROM plan_operations)) AS r) AS step_reconciles,
        (SELECT count(DISTINCT object) FROM steps
         WHERE plan_hash = '{plan_hash}'
           AND operation IN (SELECT operation FROM plan_operations)) AS objects,
        (SELECT coalesce(sum(guard_refusals), 0) FROM reconciles WHERE plan_hash = '{plan_hash}') AS guard_refusals,
        (SELECT count(*) FROM reconciles WHERE plan_hash <> '{plan_hash}')
          + (SELECT count(*) FROM steps WHERE plan_hash <> '{plan_hash}') AS other_version_rows
)
SELECT '{plan}' AS plan, '{plan_hash}' AS plan_hash,
       greatest(reconcile_rows, step_reconciles) AS reconciles,
       cancelled, reconcile_rows, step_reconciles, objects, guard_refusals, other_version_rows
FROM counts;
