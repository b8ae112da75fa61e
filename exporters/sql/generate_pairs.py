"""Writes pairs.sql for DuckDB, Spark and Trino: the analyzer's ordering pairs with their fixpoint.

Usage: python3 exporters/sql/generate_pairs.py [--check]

The analyzer (src/analyze/pairs.rs `find`) judges the ordering pairs in rounds, counting objects
(each object's first observation on each side): each round counts the pairs under "explains" =
the transitive closure of the declared dependencies plus those the previous round detected, and
detects its own set, until a round detects exactly the set it was given. X and Y are the phased
path's operations (not those in {legacy_only}, the plan's `only: legacy` ones), while the
observations take every step. SQL has no loop, so the rounds are unrolled here, ROUNDS of them,
each materialised as a table (so no engine expands the rounds' plans into one another). The
statements of a round are the same text in every dialect; only the table creation, the source of
`steps` and one ordered string aggregation differ. `--check` exits 1 when a written file differs from what would be generated.
"""

import os
import sys

ROUNDS = 32
# Squarings of the reflexive edge relation: paths of up to 2**SQUARINGS edges, enough for plans
# of up to 64 operations (a plan validated by `plan check` is acyclic, so its longest path has
# fewer edges than it has operations).
SQUARINGS = 6

HERE = os.path.dirname(os.path.abspath(__file__))


class Dialect:
    def __init__(self, name, create, view, ref, steps_source, file_column, agg, drop_note, header,
                 values="(VALUES {rows})", time_column='"time"', small=()):
        self.name = name
        self.time_column = time_column
        self.values = values
        self._create = create
        self.small = small
        self._view = view
        self._ref = ref
        self.steps_source = steps_source
        self.file_column = file_column
        self.agg = agg
        self.drop_note = drop_note
        self.header = header

    def create(self, table):
        """Starts a statement that (re)creates `table` from the query that follows."""
        if table in self.small:
            return self.view(table)
        return self._create.format(ref=self.ref(table))

    def view(self, name):
        """Starts a statement that (re)creates the view `name` from the query that follows."""
        return self._view.format(ref=self.ref(name))

    def ref(self, table):
        return self._ref.format(table=table)


DUCKDB = Dialect(
    "duckdb",
    create="CREATE OR REPLACE TEMP TABLE {ref} AS",
    view="CREATE OR REPLACE TEMP VIEW {ref} AS",
    ref="{table}",
    steps_source="""(SELECT * FROM read_parquet('{dir}/table=steps/**/*.parquet', hive_partitioning = true, filename = true)
          -- whole parts only (docs/parquet.md): a steps file whose reconciles file is missing is half a rotation
          WHERE replace(filename, '/table=steps/', '/table=reconciles/')
                IN (SELECT file FROM glob('{dir}/table=reconciles/**/*.parquet')))""",
    file_column="filename",
    agg="string_agg({col}, ',' ORDER BY {col})",
    drop_note="The intermediate tables and views (sr_*) are TEMP ones of the connection.",
    header="""-- Tested: tests/python/check_sql.py runs it on simulate's data and compares every number with
-- `analyze --format json`.
--
-- It is a script of several statements; the last one returns the pairs. Run it with the DuckDB
-- CLI (`duckdb < pairs.sql` once the placeholders are replaced) or from Python
-- (duckdb.connect().execute(text).fetchall()); see exporters/README.md.""",
)

SPARK = Dialect(
    "spark",
    # A cached temporary view: computed once, in memory, gone with the session (no warehouse
    # directory is left behind, so the script runs again in a new session).
    create="DROP VIEW IF EXISTS {ref};\nCACHE TABLE {ref} AS",
    view="CREATE OR REPLACE TEMPORARY VIEW {ref} AS",
    ref="{table}",
    steps_source="shadow_steps",
    file_column="file",
    agg="array_join(array_sort(collect_list({col})), ',')",
    values="VALUES {rows}",
    time_column="`time`",
    drop_note="The intermediate results (sr_*) are temporary views of the session, cached but for the few rows\n-- of the plan's operations, dependencies and constants.",
    # A few rows each: a plain view costs no job of its own.
    small=("sr_plan_operations", "sr_declared", "sr_z", "sr_plan_namespaces"),
    header="""-- Tested: tests/python/check_sql.py --engine spark runs it in pyspark's local mode on simulate's data
-- and compares every number with `analyze --format json`. For Spark 4.1 or later (Databricks
-- Runtime 16.3 or later): the fixpoint is a SQL script (BEGIN ... END) that stops at convergence.
-- Reads the view `shadow_steps` declared by exporters/sql/spark/tables.sql. Run it statement by
-- statement (the BEGIN ... END block is one statement), e.g. with spark.sql() in pyspark; see
-- exporters/sql/README.md.""",
)

TRINO = Dialect(
    "trino",
    create="DROP TABLE IF EXISTS {ref};\nCREATE TABLE {ref} AS",
    view="CREATE OR REPLACE VIEW {ref} AS",
    ref="{{scratch}}.{table}",
    steps_source="shadow_steps",
    file_column="file",
    agg="array_join(array_sort(array_agg({col})), ',')",
    drop_note="The intermediate tables and views (sr_*) are written to the schema {scratch} (e.g.\n-- memory.default, or a hive schema: it needs CREATE TABLE AS, INSERT and CREATE VIEW); drop them when\n-- done.",
    header="""-- Tested: tests/python/check_sql.py --engine trino runs it in a real Trino (476) on simulate's data
-- and compares every number with `analyze --format json`. Generated with the DuckDB file by
-- exporters/sql/generate_pairs.py; reads the view `shadow_steps` declared by
-- exporters/sql/trino/tables.sql (the session's catalog and schema).
-- Run it as a script (trino --catalog hive --schema shadow -f pairs.sql).""",
)

COMMON_HEADER = """-- The ordering pairs (X, Y) of one plan version: `plans[].pairs[]` of `analyze --format json`
-- (and `plans[].dependencies[]`, the pairs with dependency = true), from src/analyze/pairs.rs.
-- GENERATED by exporters/sql/generate_pairs.py: edit that, not this file.
--
-- Placeholders (replaced as text before running; tests/python/check_sql.py does it):
--   {dir}              the dataset directory (DuckDB only)
--   {scratch}          a schema for the intermediate tables and views (Trino only)
--   {plan}, {plan_hash} the plan version: only rows recorded under this exact hash count
--   {plan_operations}  the plan's operations and DECLARED dependencies, as VALUES rows
--                      ('Operation', 'DependsOn'): one row per dependsOn entry, and
--                      ('Operation', '') for an operation without any. Taken from the plan file
--                      (spec.operations[].name and dependsOn).
--   {legacy_only}      the plan's operations with `only: legacy` (they exist in the legacy loop
--                      alone), as SQL string literals for IN (...): 'ValidConfigurationCondition',
--                      or '' when the plan has none. Taken from the plan file (`only`).
--   {confidence}       the Wilson interval confidence (`confidence` in the JSON; default 0.99)
--   {min_samples}      `min_samples` in the JSON (default 30): objects needed on each side
--
-- INPUT: the steps rows and the plan's declared dependencies. COMPUTED here: everything else,
-- the detected dependencies included, by the analyzer's fixpoint:
--   A run is the control's or the candidate's steps of one reconcile (one reconcile_id within one
--   file) in `seq` order, reduced to the steps that executed (real or dry-run) or failed.
--   The pairs are those of the phased path: X and Y are operations without `only: legacy` (the
--   analyzer's phased order), while the observations behind them take every step of the plan's
--   operations (a legacy-only operation's failure is a failure before Y that X must explain).
--   The unit is the object (cluster/kind/namespace/name: a name in two clusters is two objects): each object counts once on each side of a
--   pair, by its FIRST observation there, runs ordered by (time, reconcile_id, control first;
--   of two observations of the same run, a reconcile recorded twice, the failed one).
--   Y's baseline: per object, the first run in which Y executed with no failed step before it.
--   Y after X: per object, the first run in which Y executed after X failed and every OTHER
--   failed step before Y is explained by X: it depends on X through the declared dependencies
--   or those detected in the previous round (transitively).
--   A pair is separated when the Wilson interval after X lies wholly above the baseline's,
--   declared when the plan makes Y depend on X (transitively), and a detected dependency when
--   separated, not declared and both sides have at least {min_samples} objects. It is
--   concentrated when more than one object failed after X, all in one namespace, while the
--   plan's objects span several.
--   Round r counts the pairs with the dependencies detected by round r - 1 (none for round 0)
--   and detects its own set; a dependency no longer detected leaves the explanation. The
--   analyzer stops at the first round that detects exactly the set it was given (the fixpoint)
--   and reports that round's pairs.
-- The rounds are unrolled: this script runs ROUNDS_N of them (each repeats the views sr_closure and
-- sr_judged over the tables sr_detected and sr_explains) and returns the last, with
--   rounds     the rounds the analyzer runs (1 + the first round that changed nothing), and
--   converged  true when a round changed nothing, i.e. the returned pairs are the analyzer's
--              (every later round repeats it). When false, the rounds cycled or need more than
--              ROUNDS_N (raise ROUNDS in generate_pairs.py); the analyzer then reports
--              rounds_converged = false and judges under the dependencies the cycle agrees on,
--              which this script does not reproduce.
-- The Wilson interval uses the analyzer's normal quantile (Abramowitz-Stegun 26.2.23) and formula
-- (src/analyze/stats.rs), in double precision.
-- Plans of up to 64 operations (the closure squares the dependency relation SQUARINGS_N times).
--
"""


def wilson(prefix, runs, failures, indent):
    """Columns rate, low, high of the Wilson interval at sr_z's z; [0, 1] and rate 0 without runs."""
    n = f"CAST(NULLIF({runs}, 0) AS DOUBLE)"
    p = f"(CAST({failures} AS DOUBLE) / {n})"
    z2 = "(z.z * z.z)"
    den = f"(1.0 + {z2} / {n})"
    center = f"(({p} + {z2} / (2.0 * {n})) / {den})"
    half = f"(z.z / {den} * sqrt({p} * (1.0 - {p}) / {n} + {z2} / (4.0 * {n} * {n})))"
    sep = ",\n" + " " * indent
    return sep.join([
        f"coalesce({p}, 0.0) AS {prefix}_rate",
        f"coalesce(greatest({center} - {half}, 0.0), 0.0) AS {prefix}_low",
        f"coalesce(least({center} + {half}, 1.0), 1.0) AS {prefix}_high",
    ])


def setup(d):
    """The statements that read the steps once: every table the rounds read."""
    t = d.ref
    return f"""-- The plan's operations and declared dependencies (src -> dst: dst depends on src).
{d.create('sr_plan_operations')}
SELECT operation, depends_on FROM {d.values.format(rows='{plan_operations}')} AS t(operation, depends_on);

{d.create('sr_declared')}
SELECT DISTINCT depends_on AS src, operation AS dst
FROM {t('sr_plan_operations')}
WHERE depends_on <> '';

-- The step rows of this plan version, with their object (cluster/kind/namespace/name: a name in two clusters is two objects).
{d.create('sr_rows')}
SELECT {d.file_column} AS file, reconcile_id, {d.time_column} AS t,
       coalesce(policy = 'control', false) AS control,
       seq, operation,
       -- executed and did something: a step that had nothing to do ('idle') is no observation
       execution IN ('real', 'dry-run') AND outcome <> 'idle' AS executed,
       outcome = 'failed' AS failed,
       cluster || '/' || kind || '/' || coalesce(namespace, '') || '/' || name AS object,
       CASE WHEN namespace IS NULL THEN '' ELSE cluster || '/' || namespace END AS namespace
FROM {d.steps_source}
WHERE plan = '{{plan}}' AND plan_hash = '{{plan_hash}}'
  AND operation IN (SELECT operation FROM {t('sr_plan_operations')});

-- Namespaces the plan's objects span (for `concentrated`).
{d.create('sr_plan_namespaces')}
SELECT count(DISTINCT namespace) AS namespaces FROM {t('sr_rows')};

-- The runs' steps that executed or failed, with the number of failed steps before each.
{d.create('sr_steps')}
SELECT file, reconcile_id, t, control, seq, operation, executed, failed, object, namespace,
       coalesce(sum(CASE WHEN failed THEN 1 ELSE 0 END) OVER (
           PARTITION BY file, reconcile_id, control ORDER BY seq
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS failures_before
FROM {t('sr_rows')}
WHERE executed OR failed;

-- The normal quantile for the confidence, as src/analyze/stats.rs z_for computes it.
{d.create('sr_z')}
SELECT t - (CAST(2.515517 AS DOUBLE) + CAST(0.802853 AS DOUBLE) * t + CAST(0.010328 AS DOUBLE) * t * t)
         / (CAST(1.0 AS DOUBLE) + CAST(1.432788 AS DOUBLE) * t + CAST(0.189269 AS DOUBLE) * t * t
            + CAST(0.001308 AS DOUBLE) * t * t * t) AS z
FROM (SELECT sqrt(CAST(-2.0 AS DOUBLE) * ln(p)) AS t
      FROM (SELECT least(greatest((CAST(1.0 AS DOUBLE) - CAST({{confidence}} AS DOUBLE)) / CAST(2.0 AS DOUBLE),
                                  CAST(1e-12 AS DOUBLE)), CAST(0.5 AS DOUBLE)) AS p) q) r;

-- Baselines: per object, the first run in which Y executed with nothing failed before it; with
-- their Wilson intervals.
{d.create('sr_baseline')}
SELECT b.later, b.objects, b.failures,
       {wilson('baseline', 'b.objects', 'b.failures', 7)}
FROM (SELECT later, count(*) AS objects, sum(CASE WHEN failed THEN 1 ELSE 0 END) AS failures
      FROM (SELECT operation AS later, failed,
                   row_number() OVER (PARTITION BY operation, object
                                      ORDER BY t, reconcile_id, control DESC, failed DESC) AS n
            FROM {t('sr_steps')}
            WHERE executed AND failures_before = 0) f
      WHERE n = 1
      GROUP BY later) b
CROSS JOIN {t('sr_z')} z;

-- Each executed step Y after a failure, with each failed step X before it.
{d.create('sr_failed_before')}
SELECT o.file, o.reconcile_id, o.t, o.control, o.seq, o.object, o.namespace,
       o.operation AS later, o.failed AS later_failed, f.operation AS failed
FROM {t('sr_steps')} o
JOIN {t('sr_steps')} f ON f.file = o.file AND f.reconcile_id = o.reconcile_id
                AND f.control = o.control AND f.seq < o.seq AND f.failed
WHERE o.executed AND o.failures_before > 0;

-- The set of failed operations before each such Y, as a key (sorted names).
{d.create('sr_observations')}
SELECT file, reconcile_id, t, control, seq, object, namespace, later, later_failed,
       {d.agg.format(col='failed')} AS failures_before
FROM {t('sr_failed_before')}
GROUP BY file, reconcile_id, t, control, seq, object, namespace, later, later_failed;

-- Each observation seen from each X failed before it.
{d.create('sr_observed_after')}
SELECT b.failed, o.later, o.later_failed, o.failures_before, o.object, o.namespace,
       o.t, o.reconcile_id, o.control
FROM {t('sr_observations')} o
JOIN {t('sr_failed_before')} b ON b.file = o.file AND b.reconcile_id = o.reconcile_id
                          AND b.control = o.control AND b.seq = o.seq;

-- For each (X, failures before Y): the other failures, each of which X must explain.
{d.create('sr_pattern_others')}
SELECT DISTINCT b.failed, o.failures_before, w.failed AS other
FROM {t('sr_observations')} o
JOIN {t('sr_failed_before')} b ON b.file = o.file AND b.reconcile_id = o.reconcile_id
                          AND b.control = o.control AND b.seq = o.seq
JOIN {t('sr_failed_before')} w ON w.file = o.file AND w.reconcile_id = o.reconcile_id
                          AND w.control = o.control AND w.seq = o.seq AND w.failed <> b.failed;
"""


def judged(d, explains, declared_closure):
    """The query of a round's pairs under the relation `explains` (src, dst): per object, the first
    observation of Y after X where every other failure before Y is explained."""
    t = d.ref
    return f"""WITH unexplained AS (
    SELECT DISTINCT o.failed, o.failures_before
    FROM {t('sr_pattern_others')} o
    LEFT JOIN {explains} e ON e.src = o.failed AND e.dst = o.other
    WHERE e.src IS NULL
),
firsts AS (
    SELECT p.failed, p.later, p.later_failed, p.namespace,
           row_number() OVER (PARTITION BY p.failed, p.later, p.object
                              ORDER BY p.t, p.reconcile_id, p.control DESC, p.later_failed DESC) AS n
    FROM {t('sr_observed_after')} p
    LEFT JOIN unexplained u ON u.failed = p.failed AND u.failures_before = p.failures_before
    WHERE u.failed IS NULL
),
after AS (
    SELECT failed, later, count(*) AS objects,
           sum(CASE WHEN later_failed THEN 1 ELSE 0 END) AS failures,
           count(DISTINCT CASE WHEN later_failed THEN namespace END) AS failed_namespaces
    FROM firsts
    -- The pairs of the phased path only (the analyzer judges X and Y in its phased order).
    WHERE n = 1 AND failed NOT IN ({{legacy_only}}) AND later NOT IN ({{legacy_only}})
    GROUP BY failed, later
),
intervals AS (
    SELECT a.failed, a.later,
           a.objects AS after_objects, a.failures AS after_failures,
           {wilson('after', 'a.objects', 'a.failures', 11)},
           coalesce(b.objects, 0) AS baseline_objects, coalesce(b.failures, 0) AS baseline_failures,
           coalesce(b.baseline_rate, 0.0) AS baseline_rate,
           coalesce(b.baseline_low, 0.0) AS baseline_low,
           coalesce(b.baseline_high, 1.0) AS baseline_high,
           d.src IS NOT NULL AS declared,
           a.failed_namespaces AS after_failed_namespaces,
           a.failures > 1 AND a.failed_namespaces = 1 AND ns.namespaces > 1 AS concentrated
    FROM after a
    CROSS JOIN {t('sr_z')} z
    CROSS JOIN {t('sr_plan_namespaces')} ns
    LEFT JOIN {t('sr_baseline')} b ON b.later = a.later
    LEFT JOIN {declared_closure} d ON d.src = a.failed AND d.dst = a.later
)
SELECT i.*,
       after_low > baseline_high AS separated,
       after_low > baseline_high AND NOT declared
         AND after_objects >= {{min_samples}} AND baseline_objects >= {{min_samples}} AS dependency
FROM intervals i"""


def closure_query(d, edges):
    """(src, dst) where dst depends on src transitively through `edges` (a query of src, dst).
    DuckDB squares the reflexive relation SQUARINGS times; Trino, whose planner would expand each
    squaring's two references to the one before into 2^SQUARINGS scans, extends each operation's
    reach with `reduce` over the adjacency map instead (no self-join)."""
    t = d.ref
    if d is TRINO:
        return f"""WITH edges AS (
    {edges}
),
adjacent AS (
    SELECT map_agg(src, dsts) AS next
    FROM (SELECT src, array_agg(DISTINCT dst) AS dsts FROM edges GROUP BY src) a
),
operations AS (SELECT DISTINCT operation FROM {t('sr_plan_operations')})
SELECT o.operation AS src, reached.dst
FROM operations o
CROSS JOIN adjacent g
CROSS JOIN UNNEST(reduce(
    sequence(1, 64),
    coalesce(element_at(g.next, o.operation), CAST(ARRAY[] AS array(varchar))),
    (acc, i) -> array_distinct(concat(acc, flatten(transform(
        acc, x -> coalesce(element_at(g.next, x), CAST(ARRAY[] AS array(varchar))))))),
    acc -> acc)) AS reached(dst)
WHERE reached.dst <> o.operation"""
    closure = [f"c0 AS (SELECT src, dst FROM edges UNION SELECT operation, operation FROM {t('sr_plan_operations')})"]
    for k in range(1, SQUARINGS + 1):
        closure.append(f"c{k} AS (SELECT DISTINCT a.src, b.dst FROM c{k - 1} a JOIN c{k - 1} b ON b.src = a.dst)")
    closure = ",\n".join(closure)
    return f"""WITH edges AS (
    {edges}
),
{closure}
SELECT src, dst FROM c{SQUARINGS} WHERE src <> dst"""


def base(d):
    t = d.ref
    return setup(d) + f"""
-- The dependencies the previous round detected: none before round 0.
{d.create('sr_detected')}
SELECT src, dst FROM {t('sr_declared')} WHERE 1 = 0;

-- explains(src, dst): dst depends on src, transitively, through the declared dependencies and
-- those the previous round detected (paths of up to 2^{SQUARINGS} edges).
{d.view('sr_closure')}
{closure_query(d, f"SELECT src, dst FROM {t('sr_declared')} UNION SELECT src, dst FROM {t('sr_detected')}")};

-- Before any detection, the closure is the plan's own: what `declared` means.
{d.create('sr_declared_closure')}
SELECT src, dst FROM {t('sr_closure')};

{d.create('sr_explains')}
SELECT src, dst FROM {t('sr_closure')};

-- The pairs under sr_explains: per object, the first observation of Y after X where every other
-- failure before Y is explained.
{d.view('sr_judged')}
{judged(d, t('sr_explains'), t('sr_declared_closure'))};

-- Every round's pairs, and how many dependencies each round added or dropped.
{d.create('sr_pairs')}
SELECT -1 AS round_no, j.* FROM {t('sr_judged')} j WHERE 1 = 0;

{d.create('sr_rounds')}
SELECT round_no, changed
FROM (SELECT -1 AS round_no, count(*) AS changed FROM {t('sr_pairs')}) r
WHERE 1 = 0;
"""


def round_sql(d, r):
    t = d.ref
    return f"""-- Round {r}.
{d.create('sr_explains')}
SELECT src, dst FROM {t('sr_closure')};
INSERT INTO {t('sr_pairs')} SELECT {r} AS round_no, j.* FROM {t('sr_judged')} j;
INSERT INTO {t('sr_rounds')}
SELECT {r}, count(*)
FROM (SELECT failed AS src, later AS dst FROM {t('sr_pairs')} WHERE round_no = {r} AND dependency) n
FULL OUTER JOIN {t('sr_detected')} e ON e.src = n.src AND e.dst = n.dst
WHERE n.src IS NULL OR e.src IS NULL;
{d.create('sr_detected')}
SELECT failed AS src, later AS dst FROM {t('sr_pairs')} WHERE round_no = {r} AND dependency;
"""


def final_sql(d):
    t = d.ref
    last = ROUNDS - 1
    return f"""-- The pairs of the last round: the analyzer's when converged.
SELECT '{{plan}}' AS plan, p.failed, p.later,
       p.after_objects, p.after_failures, p.after_rate, p.after_low, p.after_high,
       p.baseline_objects, p.baseline_failures, p.baseline_rate, p.baseline_low, p.baseline_high,
       p.separated, p.declared, p.dependency, p.after_failed_namespaces, p.concentrated,
       f.rounds, f.converged
FROM {t('sr_pairs')} p
CROSS JOIN (SELECT min(CASE WHEN changed = 0 THEN round_no END) + 1 AS rounds,
                   count(CASE WHEN changed = 0 THEN 1 END) > 0 AS converged
            FROM {t('sr_rounds')}) f
WHERE p.round_no = {last}
ORDER BY p.failed, p.later;
"""


STRUCT_PAIRS = "ARRAY<STRUCT<src: STRING, dst: STRING>>"
NO_NAMES = "CAST(array() AS ARRAY<STRING>)"


def spark_closure(edges):
    """Spark: (src, dst) where dst depends on src transitively through `edges` (a query of src, dst),
    without self-joins: each operation's reachable set grows by one step per iteration of
    `aggregate`, over the adjacency map of all edges (plans of up to 64 operations)."""
    return f"""WITH edges AS (
    {edges}
),
adjacent AS (
    SELECT map_from_entries(collect_list(struct(src, dsts))) AS next
    FROM (SELECT src, collect_set(dst) AS dsts FROM edges GROUP BY src) a
),
operations AS (SELECT DISTINCT operation FROM sr_plan_operations)
SELECT o.operation AS src, reached.dst
FROM operations o CROSS JOIN adjacent g
LATERAL VIEW explode(aggregate(
    sequence(1, 64),
    coalesce(try_element_at(g.next, o.operation), {NO_NAMES}),
    (acc, i) -> array_distinct(concat(acc, flatten(transform(
        acc, x -> coalesce(try_element_at(g.next, x), {NO_NAMES}))))))) reached AS dst
WHERE reached.dst <> o.operation"""


def render_spark():
    """Spark's pairs.sql: the shared statements as cached views, then the fixpoint as one SQL script
    that runs rounds until one detects exactly the set it was given, as the analyzer does."""
    d = SPARK
    header = COMMON_HEADER.replace("ROUNDS_N", str(ROUNDS)).replace("SQUARINGS_N", str(SQUARINGS))
    header = header.replace(
        "-- The rounds are unrolled: this script runs " + str(ROUNDS) + " of them (each repeats the views sr_closure and\n"
        "-- sr_judged over the tables sr_detected and sr_explains) and returns the last, with\n",
        "-- Here the rounds are a loop of a SQL script that stops at the first round that changes nothing\n"
        "-- (at most " + str(ROUNDS) + "), the dependencies detected so far held in a variable; it returns that round with\n")
    header = header.replace(
        "-- Plans of up to 64 operations (the closure squares the dependency relation " + str(SQUARINGS) + " times).\n",
        "-- Plans of up to 64 operations (the closure extends each operation's reach 64 times).\n")
    inline_explains = "(SELECT inline(explains))"
    return header + d.header + "\n-- " + d.drop_note + "\n" + setup(d) + f"""
-- Before any detection, the closure is the plan's own: what `declared` means.
{d.create('sr_declared_closure')}
{spark_closure("SELECT src, dst FROM sr_declared")};

-- The fixpoint: round r counts the pairs under the closure of the declared dependencies and
-- those round r - 1 detected, until a round detects exactly the set it was given.
BEGIN
  DECLARE round_no INT DEFAULT 0;
  DECLARE converged BOOLEAN DEFAULT false;
  DECLARE detected {STRUCT_PAIRS} DEFAULT CAST(array() AS {STRUCT_PAIRS});
  DECLARE found {STRUCT_PAIRS} DEFAULT CAST(array() AS {STRUCT_PAIRS});
  DECLARE explains {STRUCT_PAIRS} DEFAULT CAST(array() AS {STRUCT_PAIRS});
  fixpoint: WHILE round_no < {ROUNDS} DO
    SET explains = (
      SELECT collect_list(named_struct('src', src, 'dst', dst))
      FROM ({spark_closure("SELECT src, dst FROM sr_declared UNION SELECT src, dst FROM (SELECT inline(detected))")}) c);
    SET found = (
      SELECT array_sort(collect_list(named_struct('src', failed, 'dst', later)))
      FROM ({judged(d, inline_explains, 'sr_declared_closure')}) j
      WHERE dependency);
    IF found = detected THEN
      SET converged = true;
      LEAVE fixpoint;
    END IF;
    SET detected = found;
    SET round_no = round_no + 1;
  END WHILE fixpoint;
  -- The pairs of the last round: the analyzer's when converged.
  SELECT '{{plan}}' AS plan, p.failed, p.later,
         p.after_objects, p.after_failures, p.after_rate, p.after_low, p.after_high,
         p.baseline_objects, p.baseline_failures, p.baseline_rate, p.baseline_low, p.baseline_high,
         p.separated, p.declared, p.dependency, p.after_failed_namespaces, p.concentrated,
         CASE WHEN converged THEN round_no + 1 END AS rounds, converged
  FROM ({judged(d, inline_explains, 'sr_declared_closure')}) p
  ORDER BY p.failed, p.later;
END;
"""


def render(d):
    if d is SPARK:
        return render_spark()
    header = COMMON_HEADER.replace("ROUNDS_N", str(ROUNDS)).replace("SQUARINGS_N", str(SQUARINGS))
    parts = [header + d.header + "\n-- " + d.drop_note + "\n", base(d)]
    parts += [round_sql(d, r) for r in range(ROUNDS)]
    parts.append(final_sql(d))
    return "\n".join(parts)


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for d in (DUCKDB, SPARK, TRINO):
        path = os.path.join(HERE, d.name, "pairs.sql")
        text = render(d)
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(path)
            except FileNotFoundError:
                stale.append(path)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {path}")
    if stale:
        print("not as generated (run exporters/sql/generate_pairs.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
