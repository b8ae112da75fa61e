//! `exporters/`: the DuckDB SQL gives the analyzer's numbers on a `simulate` run, and the
//! OpenTelemetry Collector configuration wires every pipeline to defined components.

mod common;

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

/// The SQL and `analyze` agree on a dataset with halves of rotations, which both leave out.
#[test]
fn the_duckdb_sql_gives_the_analyzers_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let bin = env!("CARGO_BIN_EXE_shadow-reconciler");
    run(Command::new(bin)
        // simulate's default population: the missing namespace's chain of dependencies takes
        // several rounds of the pairs' fixpoint to find, so the SQL's rounds are exercised.
        .args(["simulate", "--seed", "1"])
        .arg("--parquet-dir")
        .arg(&data));
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
        .args(["--format", "json"]));
    let skipped = serde_json::from_str::<Value>(&json).unwrap()["files_skipped"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(skipped, 2, "analyze skips the two halves");
    let analysis = dir.path().join("analysis.json");
    std::fs::write(&analysis, &json).unwrap();
    let out = Command::new(common::python())
        .arg(root().join("tests/python/check_sql.py"))
        .arg(&data)
        .arg(&analysis)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "check_sql.py:\n{report}");
    eprintln!("{report}");
    let rounds: u32 = report
        .split("pair rounds: hostedcluster ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no round count in:\n{report}"));
    assert!(
        rounds > 1,
        "the fixpoint took {rounds} round(s); the test needs a chain:\n{report}"
    );
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
