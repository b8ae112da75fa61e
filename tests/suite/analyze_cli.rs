//! `shadow-reconciler analyze` as a pipeline uses it: formats, exit codes (overall and per group),
//! the suggested plan, and clear errors for bad input.
//!
//! The simulated datasets are small (40 HostedClusters), so the tests that need a verdict pass
//! `--min-samples 5`: 7 objects miss their pull secret there.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
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

/// One simulated dataset per scenario, shared by the tests of this file, with what `simulate`
/// printed.
fn simulated(scenario: &'static str) -> &'static (tempfile::TempDir, PathBuf, String) {
    static MIXED: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();
    static HEALTHY: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();
    let cell = if scenario == "healthy" {
        &HEALTHY
    } else {
        &MIXED
    };
    cell.get_or_init(|| {
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
            // A mixed world with three undeclared dependencies, whose evidence fits in the
            // Markdown's first 2 KB (more fold under the diff: `markdown_answers_in_its_first_2_kb`).
            "--seed",
            "4",
            // A bound for a broken run: the data is a settled run's (asserted below).
            "--duration",
            "600",
            "--parquet-dir",
            data.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            !text(&out.stdout)
                .lines()
                .next()
                .is_some_and(|l| l.contains("ended by the deadline")),
            "the run settled:\n{}",
            text(&out.stdout)
        );
        (dir, data, text(&out.stdout))
    })
}

fn dataset(scenario: &'static str) -> &'static Path {
    &simulated(scenario).1
}

#[test]
fn simulate_and_analyze_agree_on_every_figure_they_both_print() {
    let (_, data, printed) = simulated("mixed");
    let out = bin(&["analyze", data.to_str().unwrap(), "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for plan in doc["plans"].as_array().unwrap() {
        let name = plan["plan"].as_str().unwrap();
        // The summary's plan line and the analysis table's (which simulate prints too) are the
        // same words over the same figures.
        let summary_line = printed
            .lines()
            .find_map(|l| l.strip_prefix(&format!("  {name}: ")))
            .unwrap_or_else(|| panic!("no summary line for {name}:\n{printed}"));
        let table_line = printed
            .lines()
            .find(|l| l.starts_with(&format!("plan {name} (")))
            .unwrap_or_else(|| panic!("no analysis line for {name}:\n{printed}"));
        assert!(
            table_line.contains(&format!("): {summary_line}; ")),
            "summary: {summary_line}\nanalyze: {table_line}"
        );
        // The per-operation table: first failure, control failures, unblocked, would succeed,
        // not simulated, newly blocked.
        for op in plan["operations"].as_array().unwrap() {
            let operation = op["operation"].as_str().unwrap();
            let row = printed.lines().find(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.len() == 8 && cells[0] == name && cells[1] == operation
            });
            let expected: Vec<u64> = [
                "first_failure",
                "failures_real",
                "unblocked",
                "unblocked_succeeded",
                "unblocked_not_simulated",
                "newly_blocked",
            ]
            .iter()
            .map(|k| op[*k].as_u64().unwrap())
            .collect();
            match row {
                Some(row) => {
                    let cells: Vec<u64> = row
                        .split_whitespace()
                        .skip(2)
                        .map(|c| c.parse().unwrap())
                        .collect();
                    assert_eq!(cells, expected, "{name}/{operation}: {row}");
                    compared += 1;
                }
                // simulate leaves out operations with nothing to show.
                None => assert!(
                    expected.iter().all(|&n| n == 0),
                    "{name}/{operation}: {expected:?}"
                ),
            }
        }
    }
    assert!(compared > 5, "{compared} operations compared:\n{printed}");
}

/// The bar the small simulated datasets can reach.
const LOW: [&str; 2] = ["--min-samples", "5"];

#[test]
fn exit_codes_follow_the_readiness_in_every_format() {
    let data = dataset("mixed").to_str().unwrap();
    let json = bin(&["analyze", data, "--format", "json", LOW[0], LOW[1]]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["schema"], "shadow-reconciler.io/analysis/v2");
    assert_eq!(
        doc["readiness"],
        "not-ready",
        "the namespace dependency: {}",
        text(&json.stdout)
    );
    assert_eq!(json.status.code(), Some(1));
    for format in ["table", "markdown", "html"] {
        let out = bin(&["analyze", data, "--format", format, LOW[0], LOW[1]]);
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
    // At the default bar, 40 HostedClusters are too few to judge anything.
    let out = bin(&["analyze", data]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    // Nothing failed in the healthy run: no classification was exercised.
    let out = bin(&[
        "analyze",
        dataset("healthy").to_str().unwrap(),
        LOW[0],
        LOW[1],
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("overall: inconclusive"));
}

#[test]
fn a_healthy_run_says_for_every_group_what_it_needs() {
    let data = dataset("healthy").to_str().unwrap();
    let out = bin(&["analyze", data, "--format", "json", LOW[0], LOW[1]]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for plan in doc["plans"].as_array().unwrap() {
        for group in plan["readiness"].as_array().unwrap() {
            let name = format!(
                "{}/{}",
                plan["plan"].as_str().unwrap(),
                group["group"].as_str().unwrap()
            );
            assert_eq!(group["readiness"], "inconclusive", "{name}");
            let summary = group["summary"].as_str().unwrap();
            assert!(summary.starts_with("inconclusive: "), "{name}: {summary}");
            let findings = group["findings"].as_array().unwrap();
            assert!(!findings.is_empty(), "{name}");
            // Notices tell what enforcing changes; every other finding is open.
            let notices = [
                "newly-blocked",
                "intended-writes",
                "phased-only",
                "legacy-only",
            ];
            for f in findings
                .iter()
                .filter(|f| !notices.contains(&f["code"].as_str().unwrap_or_default()))
            {
                assert!(
                    f["next_step"].as_str().is_some_and(|s| !s.is_empty()),
                    "{name}: every open finding says how to get the evidence: {f}"
                );
            }
            // A healthy world never exercised anything: enforcing changes nothing seen so far.
            assert!(
                findings.iter().any(|f| f["code"] == "not-exercised"
                    && f["next_step"]
                        .as_str()
                        .unwrap()
                        .contains("changes nothing observed so far")),
                "{name}: {findings:?}"
            );
            // Gating on the group alone gives its readiness as the exit code.
            let out = bin(&["analyze", data, "--group", &name, LOW[0], LOW[1]]);
            assert_eq!(out.status.code(), Some(3), "{name}: {}", text(&out.stderr));
            assert!(
                text(&out.stderr).contains(&format!("group {name}: inconclusive: ")),
                "{}",
                text(&out.stderr)
            );
        }
    }
}

/// Four independent operations in three rollout groups.
const GROUPS_PLAN: &str = "apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: widgets
spec:
  operations:
    - {name: Namespace, phase: 1, category: non-critical, shadow: dry-run}
    - {name: Secret, phase: 2, category: non-critical, shadow: dry-run}
    - {name: Config, phase: 3, category: non-critical, shadow: dry-run}
    - {name: Deploy, phase: 4, category: non-critical, shadow: dry-run}
  legacy:
    order: [Namespace, Secret, Config, Deploy]
  rollout:
    groups:
      - {name: namespace, operations: [Namespace, Secret]}
      - {name: config, operations: [Config]}
      - {name: deploy, operations: [Deploy]}
";

#[test]
fn group_gates_one_rollout_group_with_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("widgets.yaml");
    std::fs::write(&plan_file, GROUPS_PLAN).unwrap();
    let plan = Arc::new(
        shadow_reconciler::plan::ReconcilePlan::from_yaml("widgets.yaml", GROUPS_PLAN).unwrap(),
    );
    // 60 objects: 15 fail at Namespace, which makes Secret fail (undeclared); 15 others fail at
    // Config, harmlessly; Deploy never fails.
    let objects: Vec<common::Object> = (0..60)
        .map(|i| {
            let faults: &[&'static str] = match i % 4 {
                0 => &["Namespace"],
                1 => &["Config"],
                _ => &[],
            };
            common::Object::new(faults, 3)
        })
        .collect();
    let data = dir.path().join("data");
    common::record_world(&data, &plan, &objects, &[("Namespace", "Secret")]);
    // Without its plan file: the plans found, and what to pass.
    let out = bin(&["analyze", data.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "the data was recorded with the plan widgets: pass the plan file it was recorded with, --plan FILE (one per plan)"
        ),
        "{}",
        text(&out.stderr)
    );
    let gate = |groups: &[&str]| {
        let mut args = vec![
            "analyze",
            data.to_str().unwrap(),
            "--plan",
            plan_file.to_str().unwrap(),
            "--format",
            "json",
            LOW[0],
            LOW[1],
        ];
        for g in groups {
            args.extend(["--group", g]);
        }
        bin(&args)
    };
    for (groups, code) in [
        (&["widgets/config"][..], 0),
        (&["widgets/namespace"][..], 1),
        (&["widgets/deploy"][..], 3),
        (&["config"][..], 0),
        (&["widgets/config", "widgets/deploy"][..], 3),
        (
            &["widgets/config", "widgets/namespace", "widgets/deploy"][..],
            1,
        ),
        (&[][..], 1),
    ] {
        let out = gate(groups);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{groups:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let out = gate(&["widgets/namespace"]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("group widgets/namespace: not ready: 1 undeclared dependencies"),
        "{stderr}"
    );
    for (selector, why) in [
        (
            "widgets/nope",
            "plan \"widgets\" has no rollout group \"nope\"",
        ),
        ("nope", "no analysed plan has a rollout group \"nope\""),
        ("other/config", "plan \"other\" has no analysable rows"),
    ] {
        let out = gate(&[selector]);
        assert_eq!(out.status.code(), Some(2), "{selector}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(why), "{selector}: {stderr}");
        assert!(
            stderr.contains("widgets/config"),
            "lists the groups: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "nothing printed before the usage error"
        );
    }
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
        LOW[0],
        LOW[1],
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
        yaml.contains("# analyze: depends on CPOImageAndNamespace: failed in"),
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

    // `-`: the same plan, or the same report, on stdout (what `kubectl exec` brings out of a pod
    // that can write no file); the report in --format goes to stderr.
    let piped = bin(&[
        "analyze",
        dataset("mixed").to_str().unwrap(),
        "--plan",
        shipped,
        "--suggest",
        "-",
        LOW[0],
        LOW[1],
    ]);
    assert_eq!(piped.status.code(), Some(1), "{}", text(&piped.stderr));
    assert_eq!(text(&piped.stdout).trim_end(), yaml.trim_end());
    assert!(text(&piped.stderr).contains("suggested plan: on stdout"));
    assert!(text(&piped.stderr).contains("hostedcluster"));
    let html = bin(&[
        "analyze",
        dataset("mixed").to_str().unwrap(),
        "--html",
        "-",
        LOW[0],
        LOW[1],
    ]);
    assert!(
        text(&html.stdout).starts_with("<!DOCTYPE html>"),
        "{}",
        text(&html.stdout)
    );
    let both = bin(&[
        "analyze",
        dataset("mixed").to_str().unwrap(),
        "--html",
        "-",
        "--suggest",
        "-",
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
    assert!(text(&both.stderr).contains("both want stdout"));
}

/// Data that asks for no plan change: `--suggest` writes nothing and says so, and no format
/// announces plan edits.
#[test]
fn nothing_to_suggest_is_said_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let suggested = dir.path().join("suggested.yaml");
    let data = dataset("healthy").to_str().unwrap();
    let out = bin(&[
        "analyze",
        data,
        "--plan",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/plans/hostedcluster.yaml"
        ),
        "--suggest",
        suggested.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("nothing to suggest") && stderr.contains("not written"),
        "{stderr}"
    );
    assert!(!suggested.exists(), "no plan file written");
    assert!(
        !text(&out.stdout).contains("the plan edits"),
        "{}",
        text(&out.stdout)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&bin(&["analyze", data, "--format", "json"]).stdout).unwrap();
    assert_eq!(json["answer"]["plan_edits"], serde_json::json!([]));
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
    common::copy_dir(source, &copy);
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
    let out = bin(&[
        "analyze",
        copy.to_str().unwrap(),
        "--format",
        "json",
        LOW[0],
        LOW[1],
    ]);
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

/// `--format markdown` is sized for a PR comment: the first 2 KB hold the readiness of every
/// rollout group and the plan edit that fixes the undeclared dependencies (a diff, whole); the
/// rest is folded in `<details>`.
#[test]
fn markdown_answers_in_its_first_2_kb() {
    let data = dataset("mixed").to_str().unwrap();
    let json = bin(&["analyze", data, "--format", "json", LOW[0], LOW[1]]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let out = bin(&["analyze", data, "--format", "markdown", LOW[0], LOW[1]]);
    let markdown = text(&out.stdout);
    let head =
        String::from_utf8_lossy(&markdown.as_bytes()[..markdown.len().min(2048)]).into_owned();
    assert!(
        head.starts_with(&format!(
            "## Shadow analysis: {}\n",
            doc["readiness"].as_str().unwrap()
        )),
        "{head}"
    );
    for plan in doc["plans"].as_array().unwrap() {
        for group in plan["readiness"].as_array().unwrap() {
            let row = format!(
                "| {}/{} | {} |",
                plan["plan"].as_str().unwrap(),
                group["group"].as_str().unwrap(),
                group["readiness"].as_str().unwrap()
            );
            assert!(head.contains(&row), "{row} not in the first 2 KB:\n{head}");
        }
    }
    // The mixed world's undeclared dependency, as an edit, closed within the 2 KB.
    let diff = head
        .split_once("```diff\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .unwrap_or_else(|| panic!("no whole diff in the first 2 KB:\n{head}"))
        .0;
    assert!(
        diff.lines().any(|l| l.starts_with('+')
            && l.contains("dependsOn:")
            && l.contains("CPOImageAndNamespace")),
        "{diff}"
    );
    assert!(
        markdown.contains("\n<details><summary>") && markdown.trim_end().ends_with("</details>"),
        "{markdown}"
    );
    // What a PR comment shows unfolded fits in the 2 KB. The edits' evidence is inline when it
    // fits too; otherwise it is the first thing folded, right under the diffs, and only because
    // inline it would have pushed the visible part over the 2 KB.
    let visible = markdown.find("<details>").unwrap();
    assert!(
        visible <= 2048,
        "{visible} bytes before the first <details>"
    );
    if !head[..visible].contains("Evidence: ") {
        let folded = markdown[visible..]
            .strip_prefix("<details><summary>Evidence for the edits</summary>\n\n")
            .and_then(|rest| rest.split_once("</details>"))
            .unwrap_or_else(|| panic!("no evidence for the edits, inline or folded:\n{markdown}"))
            .0;
        let inline: usize = folded
            .lines()
            .filter_map(|l| l.strip_prefix("- `"))
            .map(|l| l.len() + "Evidence: ".len())
            .sum();
        assert!(
            inline > 0 && visible + inline > 2048,
            "evidence folded though {inline} bytes inline would fit after {visible}:\n{markdown}"
        );
        assert!(folded.contains("CPOImageAndNamespace"), "{folded}");
    }
    // The JSON starts with the same answer: every group, and the edit as a diff.
    let answer = &doc["answer"];
    assert_eq!(answer["readiness"], doc["readiness"]);
    let groups: usize = doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["readiness"].as_array().unwrap().len())
        .sum();
    assert_eq!(answer["groups"].as_array().unwrap().len(), groups);
    assert!(
        answer["plan_edits"][0]["diff"]
            .as_str()
            .is_some_and(|d| d.contains('+') && d.contains("CPOImageAndNamespace")),
        "{answer}"
    );
    let raw = text(&json.stdout);
    let at = |key: &str| raw.find(&format!("\n  \"{key}\": ")).unwrap();
    assert!(
        at("schema") < at("answer") && at("answer") < at("dir") && at("answer") < at("plans"),
        "the answer comes first in the document"
    );
}

/// `--since` counts the reconciles that started then or later, whole (their steps with them):
/// the figures equal those of the rows at or after the cut.
#[test]
fn since_counts_only_the_reconciles_from_then() {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use shadow_reconciler::dataset::{Location, reader};
    let data = dataset("mixed");
    let mut rows: Vec<(i64, String, bool)> = Vec::new();
    let parts = reader::parts_at(&Location::Local(data.to_owned())).unwrap();
    for (path, _) in &parts.pairs {
        for batch in reader::open(
            path,
            &["time", "plan", "kind", "namespace", "name", "cancelled"],
        )
        .unwrap()
        {
            let batch = batch.unwrap();
            let column = |n: &str| batch.column_by_name(n).unwrap();
            let time = reader::time_column(&batch, path).unwrap();
            let (plan, kind, namespace, name) = (
                column("plan").as_string::<i32>(),
                column("kind").as_string::<i32>(),
                column("namespace").as_string::<i32>(),
                column("name").as_string::<i32>(),
            );
            let cancelled = column("cancelled").as_boolean();
            for i in (0..batch.num_rows()).filter(|&i| plan.value(i) == "hostedcluster") {
                let ns = if namespace.is_valid(i) {
                    namespace.value(i)
                } else {
                    ""
                };
                let object = format!("{}/{ns}/{}", kind.value(i), name.value(i));
                rows.push((time.value(i), object, cancelled.value(i)));
            }
        }
    }
    rows.sort();
    let cut = rows[rows.len() / 2].0;
    let since = k8s_openapi::jiff::Timestamp::from_microsecond(cut)
        .unwrap()
        .to_string();
    let after: Vec<&(i64, String, bool)> = rows.iter().filter(|r| r.0 >= cut && !r.2).collect();
    let objects: std::collections::BTreeSet<&str> = after.iter().map(|r| r.1.as_str()).collect();
    let out = bin(&[
        "analyze",
        data.to_str().unwrap(),
        "--since",
        &since,
        "--format",
        "json",
    ]);
    assert!(
        out.status.code().is_some_and(|c| c != 2),
        "{}",
        text(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hc = json["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plan"] == "hostedcluster")
        .unwrap();
    assert_eq!(hc["reconciles"], after.len(), "since {since}");
    assert_eq!(hc["objects"], objects.len(), "since {since}");
    assert!(after.len() < rows.len() && !objects.is_empty());

    let out = bin(&["analyze", data.to_str().unwrap(), "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("\"yesterday\" is not an RFC 3339 time"),
        "{}",
        text(&out.stderr)
    );
}
