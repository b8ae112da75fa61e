//! `exporters/`: the DuckDB and Spark SQL give the analyzer's numbers on `simulate` runs (one
//! cluster's data with halves of rotations, and a fleet of two clusters), Trino's on the first,
//! and the OpenTelemetry Collector configuration wires every pipeline to defined components.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(1) || out.status.code() == Some(3),
        "{command:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A plan whose dependencies form a chain: `Namespace` fails, so `Secret` fails, so `Config`
/// fails. The analyzer's fixpoint finds the second link only once the first explains
/// `Secret`'s failures, so its rounds (and the SQL's unrolled ones) are exercised.
const CHAIN_PLAN: &str = "apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: chain
spec:
  operations:
    - {name: Namespace, phase: 1, category: non-critical, shadow: dry-run}
    - {name: Secret, phase: 2, category: non-critical, shadow: dry-run}
    - {name: Config, phase: 3, category: non-critical, shadow: dry-run}
    - {name: Deploy, phase: 4, category: non-critical, shadow: dry-run}
  legacy:
    order: [Namespace, Secret, Config, Deploy]
";

/// The SQL and `analyze` agree on a dataset with halves of rotations, which both leave out:
/// `simulate`'s default run (every table, conflicts, write differences) and, beside it, a
/// planted chain of dependencies that the pairs' fixpoint needs more than one round for (built
/// by the test, so the rounds do not depend on how a run was scheduled).
#[test]
fn the_duckdb_spark_and_trino_sql_give_the_analyzers_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let bin = env!("CARGO_BIN_EXE_shadow-reconciler");
    run(Command::new(bin)
        .args(["simulate", "--seed", "1"])
        .arg("--parquet-dir")
        .arg(&data));
    let chain_plan = dir.path().join("chain.yaml");
    std::fs::write(&chain_plan, CHAIN_PLAN).unwrap();
    let plan = std::sync::Arc::new(
        shadow_reconciler::plan::ReconcilePlan::from_yaml("chain.yaml", CHAIN_PLAN).unwrap(),
    );
    // 200 objects: every 5th misses its namespace, every 7th fails Deploy on its own.
    let objects: Vec<common::Object> = (0..200)
        .map(|i| {
            let mut faults = Vec::new();
            if i % 5 == 0 {
                faults.push("Namespace");
            }
            if i % 7 == 0 {
                faults.push("Deploy");
            }
            common::Object::new(&faults, 1 + i % 3)
        })
        .collect();
    common::record_world(
        &data,
        &plan,
        &objects,
        &[("Namespace", "Secret"), ("Secret", "Config")],
    );
    // Two halves of rotations, as a crash leaves them (docs/parquet.md): a copy of a steps file
    // without its reconciles file and a copy of a reconciles file without its steps file. Both
    // repeat rows of whole parts, so a reader that took them would count those twice.
    let parts = shadow_reconciler::dataset::reader::parts(&data).unwrap();
    let (reconciles, steps) = parts.pairs.first().expect("a whole part");
    std::fs::copy(
        steps,
        steps.with_file_name("part-1-halfsteps-000000.parquet"),
    )
    .unwrap();
    std::fs::copy(
        reconciles,
        reconciles.with_file_name("part-1-halfreconciles-000000.parquet"),
    )
    .unwrap();
    let json = run(Command::new(bin)
        .arg("analyze")
        .arg(&data)
        .arg("--plan")
        .arg(&chain_plan)
        .args(["--format", "json"]));
    let doc = serde_json::from_str::<Value>(&json).unwrap();
    let skipped = doc["files_skipped"].as_array().map_or(0, Vec::len);
    assert_eq!(skipped, 2, "analyze skips the two halves");
    let chain = doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plan"] == "chain")
        .expect("the chain plan analysed");
    let found: BTreeSet<(String, String)> = chain["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["failed"].as_str().unwrap().to_owned(),
                d["later"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        found.contains(&("Namespace".to_owned(), "Config".to_owned())),
        "the chain's second link is found: {found:?}"
    );
    let rounds = chain["rounds"].as_u64().unwrap();
    assert!(rounds > 1, "the planted chain took {rounds} round(s)");
    let analysis = dir.path().join("analysis.json");
    std::fs::write(&analysis, &json).unwrap();
    let expected = |report: &str| {
        assert!(
            report.contains(&format!("chain {rounds}")),
            "the SQL's rounds for the chain plan are the analyzer's ({rounds}):\n{report}"
        );
    };
    for engine in ["duckdb", "spark", "trino"] {
        expected(&check_sql(&data, &analysis, engine, &[&chain_plan]));
    }
}

/// Runs `tests/python/check_sql.py` with `engine` (duckdb, spark or trino) on `data` against the
/// analysis `analysis` (with `plans` for plans that are not shipped); returns its report, failing the test on any difference.
fn check_sql(data: &Path, analysis: &Path, engine: &str, plans: &[&Path]) -> String {
    let mut command = Command::new(common::python());
    command
        .arg(root().join("tests/python/check_sql.py"))
        .arg(data)
        .arg(analysis)
        .args(["--engine", engine]);
    for plan in plans {
        command.arg("--plan").arg(plan);
    }
    let out = command.output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "check_sql.py --engine {engine}:\n{report}"
    );
    // The summary line (Spark's log lines before it are noise here).
    let summary = report
        .lines()
        .find(|l| l.starts_with("check_sql: "))
        .unwrap_or_else(|| panic!("no summary line:\n{report}"))
        .to_owned();
    eprintln!("{summary}");
    summary
}

/// A fleet: two clusters' data in one dataset. The same object names in both clusters are two
/// objects each; `analyze` reports each cluster's readiness (equal to that cluster analysed
/// alone) beside the fleet's, `--cluster` reads one cluster's data only, and both engines' SQL
/// give the fleet analysis' numbers.
#[test]
fn a_fleet_of_two_clusters_is_one_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_shadow-reconciler");
    let fleet = dir.path().join("fleet");
    for (cluster, seed, hosted) in [("east", "2", "60"), ("west", "3", "80")] {
        let own = dir.path().join(cluster);
        run(Command::new(bin)
            .args(["simulate", "--quiet", "--seed", seed, "--cluster", cluster])
            .args(["--hosted-clusters", hosted, "--addons", "20"])
            .arg("--parquet-dir")
            .arg(&own));
        common::copy_dir(&own, &fleet);
    }
    let analyse = |dir: &Path, extra: &[&str]| -> Value {
        serde_json::from_str(&run(Command::new(bin)
            .arg("analyze")
            .arg(dir)
            .args(["--format", "json"])
            .args(extra)))
        .unwrap()
    };
    let whole = analyse(&fleet, &[]);
    let clusters: Vec<&str> = whole["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["east", "west"]);
    for (i, cluster) in ["east", "west"].into_iter().enumerate() {
        let alone = analyse(&dir.path().join(cluster), &[]);
        let filtered = analyse(&fleet, &["--cluster", cluster]);
        // --cluster reads that cluster's data only: the same analysis as its own dataset.
        assert_eq!(filtered["plans"], alone["plans"], "{cluster}");
        let mine = &whole["clusters"][i];
        assert_eq!(mine["readiness"], alone["readiness"], "{cluster}");
        let objects: u64 = alone["plans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["objects"].as_u64().unwrap())
            .sum();
        assert_eq!(mine["objects"].as_u64(), Some(objects), "{cluster}");
    }
    // Both clusters name their objects alike (clusters-0, ...): the fleet counts them apart.
    let objects = |doc: &Value| doc["plans"][0]["objects"].as_u64().unwrap();
    assert_eq!(
        objects(&whole),
        objects(&analyse(&dir.path().join("east"), &[]))
            + objects(&analyse(&dir.path().join("west"), &[]))
    );
    let unknown = Command::new(bin)
        .arg("analyze")
        .arg(&fleet)
        .args(["--cluster", "north"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--cluster north") && stderr.contains("east, west"),
        "{stderr}"
    );
    let analysis = dir.path().join("fleet.json");
    std::fs::write(&analysis, serde_json::to_string(&whole).unwrap()).unwrap();
    check_sql(&fleet, &analysis, "duckdb", &[]);
    check_sql(&fleet, &analysis, "spark", &[]);
}

fn names(section: &Value) -> BTreeSet<String> {
    section
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_collector_pipelines_use_only_defined_components_and_reach_the_ingest_endpoint() {
    let text =
        std::fs::read_to_string(root().join("exporters/otel-collector/config.yaml")).unwrap();
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    let pipelines = config["service"]["pipelines"].as_object().unwrap();
    assert!(!pipelines.is_empty());
    let mut used = BTreeSet::new();
    for (name, pipeline) in pipelines {
        assert!(name.starts_with("traces"), "{name}: traces only");
        for kind in ["receivers", "processors", "exporters"] {
            let defined = names(&config[kind]);
            for component in pipeline[kind].as_array().into_iter().flatten() {
                let component = component.as_str().unwrap();
                assert!(
                    defined.contains(component),
                    "pipeline {name}: {kind} {component} is not defined"
                );
                used.insert(format!("{kind}/{component}"));
            }
        }
        let processors: Vec<&str> = pipeline["processors"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            processors.first(),
            Some(&"memory_limiter"),
            "{name}: memory_limiter first"
        );
        assert_eq!(processors.last(), Some(&"batch"), "{name}: batch last");
    }
    for kind in ["receivers", "processors", "exporters"] {
        for component in names(&config[kind]) {
            assert!(
                used.contains(&format!("{kind}/{component}")),
                "{kind} {component} is defined but no pipeline uses it"
            );
        }
    }
    let ingest = &config["exporters"]["otlphttp/shadow-ingest"];
    assert_eq!(ingest["endpoint"], "${env:SHADOW_INGEST_ENDPOINT}");
    assert!(
        config["exporters"]["otlp/backend"].is_object(),
        "a trace backend exporter"
    );
    let otlp = &config["receivers"]["otlp"]["protocols"];
    assert_eq!(otlp["grpc"]["endpoint"], "0.0.0.0:4317");
    assert_eq!(otlp["http"]["endpoint"], "0.0.0.0:4318");
}
