//! The HTML report in a real browser: headless Chromium (Debian's `chromium`, installed by
//! scripts/test.sh) renders the report `simulate` writes, and `tests/python/check_report.py`
//! (Playwright) asserts on its DOM at 1366x768 and 1920x1080, light and dark: the answer on the
//! first screen, every chart titled with a legend and axis titles, a whisker per bar, nothing
//! overflowing, no text under 12 px, no request. It also takes the screenshots; with
//! `SHADOW_RECONCILER_UPDATE_SCREENSHOTS=1` the default run's go to docs/images/ (the ones the
//! README shows).

use crate::common;

use std::path::Path;
use std::process::Command;

/// Runs `simulate` in `dir` as a user would (its data in `./shadow-data`, its report in `./shadow-data-report.html`, the paths the report
/// shows), returns the report's path.
fn simulate(dir: &Path, extra: &[&str]) -> std::path::PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["simulate", "--quiet"])
        .args(extra)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run simulate");
    assert!(
        out.status.success(),
        "simulate {extra:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("shadow-data-report.html")
}

/// A PNG's width and height, from its IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    (be(16), be(20))
}

/// Checks `report` in the browser, screenshots into `shots`.
fn check_in_browser(report: &Path, shots: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/check_report.py");
    let out = Command::new(common::python())
        .arg(script)
        .arg(report)
        .arg(shots)
        .output()
        .expect("run tests/python/check_report.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: the browser checks failed:\n{stdout}\n{}",
        report.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}: {stdout}", report.display());
    for (name, size) in [
        ("report-1366x768.png", (1366, 768)),
        ("report-1920x1080.png", (1920, 1080)),
        ("report-1366x768-dark.png", (1366, 768)),
    ] {
        assert_eq!(png_size(&shots.join(name)), size, "{name}");
    }
}

#[test]
fn the_default_runs_report_reads_in_a_browser() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = simulate(dir.path(), &[]);
    let shots = if std::env::var_os("SHADOW_RECONCILER_UPDATE_SCREENSHOTS").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/images")
    } else {
        dir.path().join("shots")
    };
    check_in_browser(&report, &shots);
}

/// A small healthy run: few failures, so few or no unblocked operations (the heatmap's empty
/// state when there are none) and no plan edit; the same checks hold.
#[test]
fn a_healthy_runs_report_reads_in_a_browser() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = simulate(
        dir.path(),
        &[
            "--scenario",
            "healthy",
            "--hosted-clusters",
            "20",
            "--addons",
            "5",
        ],
    );
    check_in_browser(&report, &dir.path().join("shots"));
    // Each plan's heatmap, or the sentence saying there is nothing to show, as the data says.
    let doc = common::analyze_json(&dir.path().join("shadow-data"));
    let html = std::fs::read_to_string(&report).expect("the report");
    let plans = doc["plans"].as_array().expect("plans");
    let empty = plans
        .iter()
        .filter(|p| p["unblocked"].as_array().is_some_and(Vec::is_empty))
        .count();
    assert_eq!(
        html.matches("the candidate ran no operation the control had skipped")
            .count(),
        empty,
        "{doc}"
    );
    assert_eq!(
        html.matches("<table class=\"heat\"").count(),
        plans.len() - empty
    );
    assert_eq!(
        html.contains("<pre class=\"diff\">"),
        !doc["answer"]["plan_edits"]
            .as_array()
            .expect("edits")
            .is_empty()
    );
}

/// A plan unlike the shipped ones: 40 operations with names of 49 to 61 characters, six of them
/// failing first in some objects, so the failure chart must cut names and the heatmap has many
/// columns. Recorded by the real Parquet sink (no API server), rendered by `analyze --html`.
#[test]
fn a_report_of_many_long_operation_names_reads_in_a_browser() {
    use std::fmt::Write as _;

    use common::{Object, record_world};
    use shadow_reconciler::util::Rng;

    let names: Vec<&'static str> = (0..40)
        .map(|i| {
            let name = format!(
                "ReconcileTheRatherLongOperationNumber{i:02}{}",
                if i % 2 == 0 {
                    "WithSuffix"
                } else {
                    "WithADescriptiveSuffix"
                }
            );
            &*Box::leak(name.into_boxed_str())
        })
        .collect();
    let mut yaml = String::from(
        "apiVersion: shadow-reconciler.io/v1alpha1\nkind: ReconcilePlan\nmetadata:\n  name: long-names\nspec:\n  operations:\n",
    );
    for (i, name) in names.iter().enumerate() {
        let _ = writeln!(
            yaml,
            "    - {{name: {name}, phase: {}, category: non-critical, shadow: dry-run}}",
            1 + i / 5
        );
    }
    let _ = writeln!(
        yaml,
        "  legacy:\n    order: [{}]\n  rollout:\n    groups:\n      - name: everything\n        operations: [{}]",
        names.join(", "),
        names.join(", ")
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let plan_file = dir.path().join("long-names.yaml");
    std::fs::write(&plan_file, &yaml).expect("write the plan");
    let plan = common::plan(&yaml);
    let failing_first = [0, 3, 7, 12, 20, 30].map(|i| names[i]);
    let mut rng = Rng::new(7);
    let objects: Vec<Object> = (0..120)
        .map(|_| {
            let faults: Vec<&'static str> = failing_first
                .iter()
                .copied()
                .filter(|_| rng.next_f64() < 0.15)
                .collect();
            Object::new(&faults, 1 + rng.below(3))
        })
        .collect();
    let data = dir.path().join("data");
    record_world(&data, &plan, &objects, &[]);
    let report = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .arg("analyze")
        .arg(&data)
        .arg("--plan")
        .arg(&plan_file)
        .arg("--html")
        .arg(&report)
        .output()
        .expect("run analyze");
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&report).expect("the report");
    assert!(html.contains('\u{2026}'), "long names are cut in the chart");
    check_in_browser(&report, &dir.path().join("shots"));
}
