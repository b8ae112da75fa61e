//! `shadow-reconciler analyze` as a pipeline uses it: formats, exit codes, the suggested plan,
//! and clear errors for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One simulated dataset per scenario, shared by the tests of this file.
fn dataset(scenario: &'static str) -> &'static Path {
    static MIXED: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    static HEALTHY: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let cell = if scenario == "healthy" {
        &HEALTHY
    } else {
        &MIXED
    };
    &cell
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let data = dir.path().join("data");
            let out = bin(&[
                "simulate",
                "--scenario",
                scenario,
                "--hosted-clusters",
                "40",
                "--addons",
                "6",
                "--seed",
                "8",
                "--parquet-dir",
                data.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            (dir, data)
        })
        .1
}

#[test]
fn exit_codes_follow_the_readiness_in_every_format() {
    let data = dataset("mixed").to_str().unwrap();
    let json = bin(&["analyze", data, "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["schema"], "shadow-reconciler.io/analysis/v1");
    assert_eq!(
        doc["readiness"],
        "not-ready",
        "the namespace dependency: {}",
        text(&json.stdout)
    );
    assert_eq!(json.status.code(), Some(1));
    for format in ["table", "markdown", "html"] {
        let out = bin(&["analyze", data, "--format", format]);
        assert_eq!(out.status.code(), Some(1), "{format}");
        let stdout = text(&out.stdout);
        let marker = match format {
            "table" => "readiness to enforce:",
            "markdown" => "# Shadow analysis: not-ready",
            _ => "<!DOCTYPE html>",
        };
        assert!(stdout.contains(marker), "{format}: {stdout}");
        assert!(stdout.contains("CPOImageAndNamespace"), "{format}");
    }
    // Nothing failed in the healthy run: no classification was exercised.
    let out = bin(&["analyze", dataset("healthy").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("overall: inconclusive"));
}

#[test]
fn the_suggested_plan_passes_plan_check_and_records_its_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let suggested = dir.path().join("suggested.yaml");
    let html = dir.path().join("report.html");
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/plans/hostedcluster.yaml"
    );
    let out = bin(&[
        "analyze",
        dataset("mixed").to_str().unwrap(),
        "--plan",
        shipped,
        "--suggest",
        suggested.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("dependsOn += CPOImageAndNamespace"),
        "{}",
        text(&out.stderr)
    );
    let check = bin(&["plan", "check", suggested.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    let yaml = std::fs::read_to_string(&suggested).unwrap();
    assert!(
        yaml.contains("# analyze: depends on CPOImageAndNamespace: failed"),
        "{yaml}"
    );
    assert!(yaml.contains("dependsOn: [CPOImageAndNamespace]"));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
    // The suggestion is a new hypothesis: the old data was not recorded under it.
    let out = bin(&[
        "analyze",
        dataset("mixed").to_str().unwrap(),
        "--plan",
        suggested.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("plan hostedcluster"), "{stdout}");
}

#[test]
fn bad_input_is_exit_2_with_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = bin(&["analyze", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no such directory"),
        "{}",
        text(&out.stderr)
    );

    let out = bin(&["analyze", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no rows of the plans"),
        "{}",
        text(&out.stderr)
    );

    let out = bin(&["analyze", dir.path().to_str().unwrap(), "--confidence", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("outside 0.5 to 0.9999"),
        "{}",
        text(&out.stderr)
    );

    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "apiVersion: shadow-reconciler.io/v1alpha1\nkind: ReconcilePlan\nmetadata: {name: x}\nspec: {operations: [{name: A}]}\n").unwrap();
    let out = bin(&[
        "analyze",
        dir.path().to_str().unwrap(),
        "--plan",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("broken.yaml:4"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_corrupt_file_is_skipped_and_reported_not_fatal() {
    let source = dataset("mixed");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("data");
    copy_dir(source, &copy);
    let partition = std::fs::read_dir(copy.join("table=steps"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let hour = std::fs::read_dir(&partition)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(hour.join("part-corrupt.parquet"), b"PAR1garbagePAR1").unwrap();
    let out = bin(&["analyze", copy.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped = doc["files_skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("part-corrupt.parquet")
    );
    assert!(
        text(&out.stderr).contains("skipped a Parquet file"),
        "warned: {}",
        text(&out.stderr)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
