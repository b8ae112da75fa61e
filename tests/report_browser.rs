//! The HTML report in a real browser: headless Chromium (Debian's `chromium`, installed by
//! scripts/test.sh) renders the report `simulate` writes, and `tests/python/check_report.py`
//! (Playwright) asserts on its DOM at 1366x768 and 1920x1080, light and dark: the answer on the
//! first screen, every chart titled with a legend and axis titles, a whisker per bar, nothing
//! overflowing, no text under 12 px, no request. It also takes the screenshots; with
//! `SHADOW_RECONCILER_UPDATE_SCREENSHOTS=1` the default run's go to docs/images/ (the ones the
//! README shows).

mod common;

use std::path::Path;
use std::process::Command;

/// Runs `simulate` in `dir` as a user would (its data in `./shadow-data`, the path the report
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
    dir.join("shadow-data/report.html")
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

/// A healthy run: nothing fails, nothing is unblocked (the heatmap's empty state), every group
/// inconclusive; the same checks hold.
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
}
