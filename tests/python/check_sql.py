"""Checks the SQL of exporters/sql/ (DuckDB's, Spark's or Trino's) against the analyzer's JSON.

Usage: check_sql.py DATASET_DIR ANALYSIS_JSON [--engine duckdb|spark|trino] [--plan FILE]...

ANALYSIS_JSON is `shadow-reconciler analyze DATASET_DIR --format json` of the same directory. For
each plan in it, runs every query file of exporters/sql/ENGINE/ (default duckdb) with its
placeholders replaced ({dir}, {plan}, {plan_hash}, {plan_operations}, {legacy_only} and {phased_only} from the
plan file, {confidence}, {min_samples} from the JSON) and compares every number the query returns
with the JSON's: per operation (the phased path's operations, as analyze lists them), failures by
class, the unblocked matrix, the ordering pairs (counts exactly, rates and Wilson bounds within
1e-9, the separated/declared/dependency flags), the write differences (objects and rows per
operation and kind of difference; not the bounded name and field lists) and the plan's counts.
Plan files: each --plan FILE, else the shipped plan of that name in deploy/plans/. Spark runs in
pyspark's local mode (one session for every file, the tables declared by spark/tables.sql, UTC
session time zone).

Prints one summary line with the number of values compared; exits 1 with the list of differences
on any mismatch, and when nothing was compared.
"""

import glob
import json
import math
import os
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SQL_DIR = os.path.join(ROOT, "exporters", "sql")
TOLERANCE = 1e-9
INTERVAL = ("objects", "failures", "rate", "low", "high")
PAIR_FLAGS = ("separated", "declared", "dependency", "after_failed_namespaces", "concentrated")
PAIR_FIELDS = ([f"after.{k}" for k in INTERVAL] + [f"baseline.{k}" for k in INTERVAL]
               + list(PAIR_FLAGS))


def strip_comment(line):
    """The line without a YAML comment (plan names and dependsOn entries hold no '#')."""
    if line.lstrip().startswith("#"):
        return ""
    cut = line.find(" #")
    return line if cut < 0 else line[:cut]


def unquote(value):
    return value.strip().strip("'\"")


def flow_items(text):
    """The items of a flow collection's inside (`a, b` of `[a, b]` or `k: v, k: [a, b]` of
    `{...}`), split at the commas outside brackets."""
    items, depth, current = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        items.append(current.strip())
    return items


def parse_plan(path):
    """(name, [(operation, [depends_on, ...], only)]) from a ReconcilePlan file, `only` being
    'legacy', 'phased' or None.

    A reader of the few keys needed (metadata.name, and of each item of spec.operations its name,
    dependsOn (flow `[A, B]` or block `- A` style) and only; an operation may also be written as a
    flow mapping `- {name: A, dependsOn: [B]}`), so the check needs no YAML library. An
    operation is an item at the indent of the list's first item; what is nested deeper in it
    (the `- kind: ...` mappings of `intendedDifferences`, a description's lines) is skipped.
    """
    name = None
    operations = []
    in_operations = None  # indent of the `operations:` key while inside it
    item_indent = None  # indent of the operations' `- ` items
    key_indent = None  # indent of an operation's own keys
    in_depends = None  # indent of the `dependsOn:` key while reading its block list
    in_metadata = False
    with open(path) as f:
        lines = [strip_comment(line.rstrip("\n")) for line in f]

    def key(item):
        field, _, value = item.partition(":")
        field, value = field.strip(), value.strip()
        if field == "name":
            operations[-1][0] = unquote(value)
        elif field == "only":
            operations[-1][2] = unquote(value)
        elif field == "dependsOn":
            if value.startswith("["):
                operations[-1][1].extend(unquote(v) for v in flow_items(value[1:-1]) if v.strip())
            elif value:
                raise SystemExit(f"{path}: cannot read dependsOn: {value}")
            else:
                return "block"
        return None

    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0:
            in_metadata = text == "metadata:"
            in_operations = None
        if in_metadata and indent > 0 and text.startswith("name:") and name is None:
            name = unquote(text.split(":", 1)[1])
        if text == "operations:" and in_operations is None and indent == 2:
            in_operations = indent
            item_indent = key_indent = None
            continue
        if in_operations is None:
            continue
        if indent <= in_operations and not (text.startswith("- ") and indent == in_operations):
            in_operations = None
            in_depends = None
            continue
        if in_depends is not None:
            if indent >= in_depends and text.startswith("- ") and ":" not in text:
                operations[-1][1].append(unquote(text[2:]))
                continue
            in_depends = None
        if item_indent is None and text.startswith("- "):
            item_indent = indent
        if indent == item_indent and text.startswith("- "):
            item = text[2:].strip()
            key_indent = indent + len(text) - len(text[1:].lstrip())
            operations.append([None, [], None])
            if item.startswith("{"):
                for field in flow_items(item[1:-1]):
                    key(field)
                continue
            if key(item) == "block":
                in_depends = indent
            continue
        if indent == key_indent and key(text) == "block":
            in_depends = indent
    operations = [tuple(op) for op in operations]
    if not name or not operations or any(op[0] is None for op in operations):
        raise SystemExit(f"{path}: no plan name or no operations found (or an operation without a name)")
    for op, _, only in operations:
        if only not in (None, "legacy", "phased"):
            raise SystemExit(f"{path}: {op}: cannot read only: {only}")
    return name, operations


def plan_files(extra):
    plans = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "plans", "*.yaml"))) + extra:
        name, operations = parse_plan(path)
        plans[name] = (path, operations)
    return plans


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def only_list(operations, path):
    """{legacy_only} / {phased_only}: the names of the operations with `only: PATH` as SQL string
    literals for `IN (...)`; '' (no operation is named so) when there are none."""
    names = [quote(op) for op, _, only in operations if only == path]
    return ", ".join(names) if names else "''"


def values_list(operations):
    rows = []
    for op, deps, _ in operations:
        for dep in deps or [""]:
            rows.append(f"({quote(op)}, {quote(dep)})")
    return ", ".join(rows)


def substitute(path, substitutions):
    with open(path) as f:
        text = f.read()
    for key, value in substitutions.items():
        text = text.replace("{" + key + "}", value)
    return text


def statements(text):
    """The statements of a script: split at a `;` that ends a line, a `BEGIN` ... `END;` block (a
    SQL script) kept whole."""
    out, current, depth = [], [], 0
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("--") and not current:
            continue
        current.append(line)
        if stripped == "BEGIN":
            depth += 1
        elif stripped == "END;" and depth:
            depth -= 1
        if stripped.endswith(";") and depth == 0:
            statement = "\n".join(current).strip().rstrip(";")
            if statement:
                out.append(statement)
            current = []
    if "\n".join(current).strip():
        out.append("\n".join(current).strip())
    return out


class DuckDB:
    name = "DuckDB"

    def __init__(self, root):
        import duckdb
        self.duckdb = duckdb

    def run(self, path, substitutions):
        con = self.duckdb.connect()
        try:
            cursor = con.execute(substitute(path, substitutions))
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]
        finally:
            con.close()

    def close(self):
        pass


class Trino:
    """A real Trino server (the directory `SHADOW_RECONCILER_TRINO`, as scripts/trino.sh unpacks it,
    with the Java it names in `java-home`), started on a free loopback port with a hive catalog on
    the local file system (a file metastore) and a memory catalog for pairs.sql's scratch tables;
    its tables declared once by trino/tables.sql over the dataset."""
    name = "Trino"

    def __init__(self, root):
        import socket
        import subprocess
        import tempfile
        import urllib.request
        import trino
        import trino.exceptions
        home = os.environ.get("SHADOW_RECONCILER_TRINO")
        if not home or not os.path.isdir(home):
            raise SystemExit("SHADOW_RECONCILER_TRINO is not a Trino server directory "
                             "(scripts/trino.sh downloads and unpacks one)")
        with open(os.path.join(home, "java-home")) as f:
            java_home = f.read().strip()
        self.scratch = tempfile.mkdtemp(prefix="check-sql-trino-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        etc = os.path.join(self.scratch, "etc")
        os.makedirs(os.path.join(etc, "catalog"))
        files = {
            "node.properties": f"node.environment=check\nnode.id=check-sql\n"
                               f"node.data-dir={self.scratch}/data\n",
            # C1 only (TieredStopAtLevel=1): a server that lives for a few hundred small queries
            # spends more CPU compiling with C2 than C2's code gives back (175 CPU-s against
            # 130 for the whole check, with the plugins below).
            "jvm.config": "-server\n-Xmx1G\n-XX:+UseG1GC\n-XX:+ExitOnOutOfMemoryError\n"
                          "-XX:TieredStopAtLevel=1\n-Djdk.attach.allowAttachSelf=true\n",
            # One node, the coordinator itself: no failure detector (on a loaded machine its
            # heartbeats time out and the only node is dropped: "No nodes available").
            "config.properties": f"coordinator=true\nnode-scheduler.include-coordinator=true\n"
                                 "failure-detector.enabled=false\n"
                                 f"http-server.http.port={port}\n"
                                 f"discovery.uri=http://127.0.0.1:{port}\n"
                                 "query.max-memory=512MB\nquery.max-memory-per-node=512MB\n"
                                 # Only the connectors the catalogs use: the server loads every
                                 # plugin of its plugin directory at start (55 in 476).
                                 f"plugin.dir={self.scratch}/plugin\n",
            "catalog/hive.properties": "connector.name=hive\nhive.metastore=file\n"
                                       f"hive.metastore.catalog.dir=local://{self.scratch}/metastore\n"
                                       "fs.native-local.enabled=true\nlocal.location=/\n"
                                       "hive.timestamp-precision=MICROSECONDS\n",
            "catalog/memory.properties": "connector.name=memory\n",
        }
        for name, text in files.items():
            with open(os.path.join(etc, name), "w") as f:
                f.write(text)
        os.makedirs(os.path.join(self.scratch, "metastore"))
        os.makedirs(os.path.join(self.scratch, "plugin"))
        for plugin in ("hive", "memory"):
            os.symlink(os.path.join(home, "plugin", plugin), os.path.join(self.scratch, "plugin", plugin))
        env = dict(os.environ, JAVA_HOME=java_home,
                   PATH=os.path.join(java_home, "bin") + os.pathsep + os.environ["PATH"])
        self.log = open(os.path.join(self.scratch, "server.log"), "w")
        self.process = subprocess.Popen(
            [os.path.join(home, "bin", "launcher"), "run", f"--etc-dir={etc}"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        while True:
            # Generous: only a hung server reaches it, not a slow machine.
            if time.monotonic() - started > 600 or self.process.poll() is not None:
                with open(os.path.join(self.scratch, "server.log")) as f:
                    log = f.read()[-4000:]
                self.close()
                raise SystemExit(f"Trino did not start:\n{log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/info", timeout=5) as r:
                    if not json.load(r).get("starting", True):
                        break
            except OSError:
                pass
            time.sleep(1)
        self.connection = trino.dbapi.connect(host="127.0.0.1", port=port, user="check_sql",
                                              catalog="hive", schema="shadow")
        # "starting": false comes before the node has announced itself to the scheduler; until
        # it has, a query fails with NO_NODES_AVAILABLE (execute waits for it).
        try:
            self.execute("SELECT 1")
        except BaseException:
            self.close()
            raise
        tables = os.path.join(SQL_DIR, "trino", "tables.sql")
        try:
            for statement in statements(substitute(tables, {"dir": "local://" + root,
                                                            "schema": "shadow"})):
                self.execute(statement)
        except BaseException:
            # The server is a process of its own: never leave it running.
            self.close()
            raise

    def execute(self, statement):
        import trino.exceptions
        # The one node's announcement to its own discovery service expires when the machine is
        # too loaded to refresh it in time (seen mid-run, the failure detector being off): the
        # query is then refused before it runs, with NO_NODES_AVAILABLE, and runs once the node
        # announces itself again. Wait for that (generous: only a server that lost its node for
        # good reaches the limit), never for any other error.
        waited = time.monotonic()
        while True:
            cursor = self.connection.cursor()
            try:
                cursor.execute(statement)
                break
            except trino.exceptions.TrinoQueryError as e:
                if e.error_name != "NO_NODES_AVAILABLE" or time.monotonic() - waited > 600:
                    raise
            time.sleep(1)
        rows = cursor.fetchall()
        columns = [d[0] for d in cursor.description or []]
        return [dict(zip(columns, row)) for row in rows]

    def run(self, path, substitutions):
        rows = []
        for statement in statements(substitute(path, dict(substitutions, scratch="memory.default"))):
            rows = self.execute(statement)
        return rows

    def close(self):
        import shutil
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except Exception:
                self.process.kill()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class Spark:
    """pyspark in local mode, its tables declared once by spark/tables.sql over the dataset."""
    name = "Spark"

    def __init__(self, root):
        import tempfile
        from pyspark.sql import SparkSession
        self.scratch = tempfile.mkdtemp(prefix="check-sql-spark-")
        self.session = (SparkSession.builder.master("local[2]")
                        .appName("check_sql")
                        .config("spark.ui.enabled", "false")
                        .config("spark.ui.showConsoleProgress", "false")
                        .config("spark.sql.session.timeZone", "UTC")
                        # Small data, a few hundred queries: one shuffle partition, no
                        # re-planning at run time, and the driver's JIT at C1 only (124 CPU-s
                        # against 81 for the check of a default run's dataset).
                        .config("spark.sql.shuffle.partitions", "1")
                        .config("spark.sql.adaptive.enabled", "false")
                        .config("spark.sql.warehouse.dir", os.path.join(self.scratch, "warehouse"))
                        .config("spark.driver.extraJavaOptions",
                                f"-Dderby.system.home={self.scratch} -XX:TieredStopAtLevel=1")
                        .getOrCreate())
        self.session.sparkContext.setLogLevel("ERROR")
        tables = os.path.join(SQL_DIR, "spark", "tables.sql")
        for statement in statements(substitute(tables, {"dir": "file://" + root})):
            self.session.sql(statement).collect()
        self.problems = []
        # tables.sql types the partition columns as Spark's own inference does, and the dataset's
        # root reads as Parquet (nothing else lies in the tree). A dataset written before the
        # writes table existed has no writes file (nothing to infer from).
        for table in ("steps", "reconciles", "writes"):
            if not glob.glob(os.path.join(root, f"table={table}", "**", "*.parquet"),
                             recursive=True):
                continue
            declared = {f.name: f.dataType.simpleString()
                        for f in self.session.table(f"shadow_{table}_files").schema.fields}
            inferred = {f.name: f.dataType.simpleString()
                        for f in self.session.read.parquet(f"file://{root}/table={table}").schema.fields}
            if declared != inferred:
                self.problems.append(f"spark/tables.sql: shadow_{table}_files is typed {declared}, "
                                     f"spark.read.parquet infers {inferred}")
        whole = self.session.read.parquet("file://" + root)
        tables = {r[0] for r in whole.select("table").distinct().collect()}
        if not {"steps", "reconciles"} <= tables <= {"steps", "reconciles", "writes"}:
            self.problems.append(f"spark.read.parquet of the dataset's root: tables {tables}")

    def run(self, path, substitutions):
        rows = []
        for statement in statements(substitute(path, substitutions)):
            rows = self.session.sql(statement).collect()
        return [row.asDict() for row in rows]

    def close(self):
        import shutil
        self.session.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


class Comparison:
    def __init__(self):
        self.compared = 0
        self.by_plan = {}
        self.mismatches = []
        self.rounds = {}
        self.seconds = {}

    def value(self, plan, where, sql, expected):
        self.compared += 1
        self.by_plan[plan] = self.by_plan.get(plan, 0) + 1
        if (isinstance(expected, (bool, str)) or isinstance(sql, (bool, str))
                or expected is None or sql is None):
            same = sql == expected
        elif isinstance(expected, float) or isinstance(sql, float):
            same = math.isclose(float(sql), float(expected), rel_tol=0.0, abs_tol=TOLERANCE)
        else:
            same = int(sql) == int(expected) and float(sql) == float(expected)
        if not same:
            self.mismatches.append(f"{plan}: {where}: sql {sql!r} != json {expected!r}")

    def keyed(self, plan, where, sql_rows, json_rows, fields):
        """Compares two {key: {field: value}} maps; a key on one side only is a mismatch."""
        for key in sorted(set(sql_rows) | set(json_rows), key=str):
            label = f"{where}[{'/'.join(map(str, key)) if isinstance(key, tuple) else key}]"
            if key not in sql_rows or key not in json_rows:
                self.compared += 1
                self.by_plan[plan] = self.by_plan.get(plan, 0) + 1
                side = "sql" if key in sql_rows else "json"
                row = sql_rows.get(key, json_rows.get(key))
                self.mismatches.append(f"{plan}: {label}: only in {side}: {row}")
                continue
            for field in fields:
                self.value(plan, f"{label}.{field}", sql_rows[key][field], json_rows[key][field])


def check_plan(cmp, engine, root, analysis, report, plans, files):
    plan, plan_hash = report["plan"], report["plan_hash"]
    if plan not in plans:
        raise SystemExit(f"no plan file for plan {plan}: pass --plan FILE")
    plan_path, operations = plans[plan]
    # analyze lists every operation of the plan, each with the code path it alone belongs to.
    json_ops = [o["operation"] for o in report["operations"]]
    if sorted(json_ops) != sorted(op for op, _, _ in operations):
        raise SystemExit(f"{plan_path}: its operations differ from the analysis of {plan} "
                         f"(another version of the plan? pass --plan FILE)")
    subs = {
        "dir": root,
        "plan": plan,
        "plan_hash": plan_hash,
        "plan_operations": values_list(operations),
        "legacy_only": only_list(operations, "legacy"),
        "phased_only": only_list(operations, "phased"),
        "confidence": repr(float(analysis["confidence"])),
        "min_samples": str(int(analysis["min_samples"])),
    }
    done = set()
    for path in files:
        name = os.path.basename(path)
        started = time.monotonic()
        rows = engine.run(path, subs)
        cmp.seconds[name] = cmp.seconds.get(name, 0.0) + time.monotonic() - started
        done.add(name)
        if name == "operations.sql":
            fields = ["executions", "executions_real", "executions_dry_run", "failures",
                      "failures_real", "failures_dry_run", "failed_objects",
                      "failure_rate", "first_failure", "blocked_in_control",
                      "blocked_then_run_by_candidate", "blocked_then_succeeded_in_candidate",
                      "newly_blocked", "unblocked", "unblocked_succeeded", "unblocked_failed",
                      "unblocked_not_simulated", "only"]
            cmp.keyed(plan, "operations", {r["operation"]: r for r in rows},
                      {o["operation"]: o for o in report["operations"]}, fields)
        elif name == "failures_by_class.sql":
            sql = {(r["operation"], r["error_class"]): {"failures": r["failures"]} for r in rows}
            expected = {(o["operation"], c): {"failures": n}
                        for o in report["operations"] for c, n in o["failures_by_class"].items()}
            cmp.keyed(plan, "operations.failures_by_class", sql, expected, ["failures"])
        elif name == "unblocked.sql":
            cmp.keyed(plan, "unblocked", {(r["first_failure"], r["operation"]): r for r in rows},
                      {(u["first_failure"], u["operation"]): u for u in report["unblocked"]},
                      ["unblocked", "succeeded"])
        elif name == "pairs.sql":
            if rows and not rows[0]["converged"]:
                cmp.mismatches.append(f"{plan}: pairs.sql: the fixpoint did not converge in the "
                                      "unrolled rounds (raise ROUNDS in generate_pairs.py)")
            sql = {}
            for r in rows:
                sql[(r["failed"], r["later"])] = {
                    **{f"after.{k}": r[f"after_{k}"] for k in INTERVAL},
                    **{f"baseline.{k}": r[f"baseline_{k}"] for k in INTERVAL},
                    **{k: r[k] for k in PAIR_FLAGS},
                }
            expected = {}
            for p in report["pairs"]:
                expected[(p["failed"], p["later"])] = {
                    **{f"after.{k}": p["after"][k] for k in INTERVAL},
                    **{f"baseline.{k}": p["baseline"][k] for k in INTERVAL},
                    **{k: p[k] for k in PAIR_FLAGS},
                }
            cmp.keyed(plan, "pairs", sql, expected, PAIR_FIELDS)
            deps_sql = {k: {"after.objects": v["after.objects"], "after.failures": v["after.failures"]}
                        for k, v in sql.items() if v["dependency"]}
            deps_json = {(d["failed"], d["later"]): {"after.objects": d["after"]["objects"],
                                                     "after.failures": d["after"]["failures"]}
                         for d in report["dependencies"]}
            cmp.keyed(plan, "dependencies", deps_sql, deps_json, ["after.objects", "after.failures"])
            rounds = rows[0]["rounds"] if rows else 1
            cmp.value(plan, "plans.rounds", rounds, report["rounds"])
            cmp.rounds[plan] = rounds
        elif name == "plan.sql":
            if len(rows) != 1:
                cmp.mismatches.append(f"{plan}: plan.sql returned {len(rows)} rows")
                continue
            for field in ("reconciles", "cancelled", "objects", "guard_refusals", "other_version_rows"):
                cmp.value(plan, f"plans.{field}", rows[0][field], report[field])
        elif name == "writes.sql":
            key = ("operation", "kind", "subresource", "control", "candidate", "intended")
            # The bounded lists (names, fields) are not compared: which names or fields a
            # bounded list keeps depends on the order the files are read in.
            cmp.keyed(plan, "writes", {tuple(r[k] for k in key): r for r in rows},
                      {tuple(w[k] for k in key): w for w in report["writes"]},
                      ["objects", "rows"])
            # An empty list on both sides is still a comparison: no write difference.
            cmp.value(plan, "writes.count", len(rows), len(report["writes"]))
        elif name == "unknown_operations.sql":
            cmp.keyed(plan, "unknown_operations", {r["operation"]: {"n": r["step_rows"]} for r in rows},
                      {k: {"n": v} for k, v in report["unknown_operations"].items()}, ["n"])
            # An empty map on both sides is still a comparison: no unknown operation.
            cmp.value(plan, "unknown_operations.count", len(rows), len(report["unknown_operations"]))
        else:
            cmp.mismatches.append(f"{plan}: {name}: no comparison defined for this file")
    return done


def main(argv):
    args = argv[1:]
    extra = []
    engine_name = "duckdb"
    if "--engine" in args:
        i = args.index("--engine")
        engine_name = args[i + 1]
        del args[i:i + 2]
        if engine_name not in ("duckdb", "spark", "trino"):
            raise SystemExit(f"--engine {engine_name}: not duckdb, spark or trino")
    while "--plan" in args:
        i = args.index("--plan")
        extra.append(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    root, analysis_path = os.path.abspath(args[0]), args[1]
    with open(analysis_path) as f:
        analysis = json.load(f)
    plans = plan_files(extra)
    files = sorted(f for f in glob.glob(os.path.join(SQL_DIR, engine_name, "*.sql"))
                   if os.path.basename(f) != "tables.sql")
    if not files:
        raise SystemExit(f"no SQL files in {SQL_DIR}/{engine_name}")
    cmp = Comparison()
    # The generated pairs.sql files must be what the generator writes today.
    sys.path.insert(0, SQL_DIR)
    sys.dont_write_bytecode = True  # no __pycache__ in exporters/sql
    import generate_pairs  # noqa: E402
    stale = [d.name for d in (generate_pairs.DUCKDB, generate_pairs.SPARK, generate_pairs.TRINO)
             if open(os.path.join(SQL_DIR, d.name, "pairs.sql")).read() != generate_pairs.render(d)]
    if stale:
        cmp.mismatches.append("pairs.sql not as generated (run exporters/sql/generate_pairs.py) for: "
                              + ", ".join(stale))
    ran = set()
    started = time.monotonic()
    engine = {"duckdb": DuckDB, "spark": Spark, "trino": Trino}[engine_name](root)
    try:
        cmp.mismatches.extend(getattr(engine, "problems", []))
        for report in analysis["plans"]:
            ran |= check_plan(cmp, engine, root, analysis, report, plans, files)
    finally:
        engine.close()
    seconds = time.monotonic() - started
    if not analysis["plans"]:
        cmp.mismatches.append("the analysis has no plans")
    if cmp.compared == 0:
        cmp.mismatches.append("no value was compared")
    per_plan = ", ".join(f"{p} {n}" for p, n in cmp.by_plan.items())
    rounds = ", ".join(f"{p} {n}" for p, n in cmp.rounds.items())
    if cmp.mismatches:
        print(f"check_sql: {root}: {len(cmp.mismatches)} of {cmp.compared} values differ "
              f"({len(ran)} {engine.name} files, per plan: {per_plan})", file=sys.stderr)
        for m in cmp.mismatches:
            print(f"  {m}", file=sys.stderr)
        return 1
    timing = ", ".join(f"{n} {s:.1f}" for n, s in sorted(cmp.seconds.items()))
    print(f"check_sql: {root}: {cmp.compared} values equal to {analysis_path} "
          f"({len(ran)} {engine.name} files in {seconds:.1f} s, per plan: {per_plan}; "
          f"pair rounds: {rounds}; seconds per file: {timing})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
