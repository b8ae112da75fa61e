//! The noise calibration of the reference reconcilers: `simulate --mode calibrate` pairs every
//! operation's own code with it (its dry run, then the real run, on the same world) over the
//! scenarios' faults, conflicts and the server's allocations (a Service's address and node port,
//! generated names, owner UIDs), and the analysis finds no noise: the comparison is quiet on
//! identical code.

use std::process::Command;

use serde_json::Value;

#[test]
fn calibrating_the_reference_reconcilers_finds_no_noise() {
    for scenario in ["healthy", "mixed"] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let bin = env!("CARGO_BIN_EXE_shadow-reconciler");
        let out = Command::new(bin)
            .args(["simulate", "--mode", "calibrate", "--scenario", scenario])
            .args([
                "--hosted-clusters",
                "40",
                "--addons",
                "12",
                "--duration",
                "300",
                "-q",
            ])
            .arg("--parquet-dir")
            .arg(&data)
            .output()
            .unwrap();
        let summary = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{summary}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dry_runs: u64 = summary
            .lines()
            .find_map(|l| l.strip_prefix("shadow: "))
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no shadow line:\n{summary}"));
        assert!(dry_runs > 0, "the paired runs are dry runs:\n{summary}");
        let json = Command::new(bin)
            .arg("analyze")
            .arg(&data)
            .args(["--format", "json"])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
        for plan in doc["plans"].as_array().unwrap() {
            assert_eq!(
                plan["noise"],
                Value::Array(vec![]),
                "{scenario} {}",
                plan["plan"]
            );
            assert_eq!(
                plan["writes"],
                Value::Array(vec![]),
                "{scenario} {}",
                plan["plan"]
            );
            assert!(plan["reconciles"].as_u64().unwrap() > 0);
        }
    }
}
