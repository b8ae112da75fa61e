//! The Parquet dataset as processes write it: `simulate` into a directory read back by pyarrow and
//! DuckDB (the numbers must equal `analyze`'s JSON; the rollout driver's record as our reader
//! reads it), writers killed with SIGKILL mid-write, and
//! `run` stopped with SIGTERM.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::wait::wait_for;
use shadow_reconciler::dataset::{Table, reader};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// pyarrow's and DuckDB's view of a dataset (`tests/python/check_dataset.py`).
fn python_check(dir: &Path) -> serde_json::Value {
    let out = Command::new(common::python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/check_dataset.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every committed file under `dir`, read to the end with our reader; returns rows per table.
fn read_all(dir: &Path) -> [u64; 3] {
    let mut rows = [0; 3];
    for (i, table) in Table::ALL.into_iter().enumerate() {
        let columns: Vec<String> = table
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        for file in reader::files(dir, table).unwrap() {
            for batch in reader::open(&file, &columns).unwrap_or_else(|e| panic!("{e}")) {
                rows[i] += batch.unwrap_or_else(|e| panic!("{e}")).num_rows() as u64;
            }
        }
    }
    rows
}

fn simulate(dir: &Path, extra: &[&str]) -> Command {
    let mut command = bin();
    command.args([
        "simulate",
        "--hosted-clusters",
        "60",
        "--addons",
        "10",
        "--seed",
        "4",
        "--parquet-dir",
        dir.to_str().unwrap(),
    ]);
    command.args(extra);
    command
}

#[test]
fn pyarrow_and_duckdb_read_what_simulate_wrote_and_agree_with_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("shadow-data");
    // Small files, so the run writes several per table.
    let out: Output = simulate(&data, &["--parquet-max-rows", "2000"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("readiness to enforce:"), "{stdout}");
    let report = dir.path().join("shadow-data-report.html");
    assert!(
        stdout.contains(&format!("HTML report: {}", report.display())),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&report).unwrap();
    // Two charts per plan (an inline SVG and a heatmap table), drawn in the page itself.
    assert!(
        html.matches("<figure class=\"chart\"").count() >= 3,
        "charts inline"
    );
    assert!(html.matches("<svg").count() >= 2, "charts inline");
    for fetch in ["<script", "src=\"http", "href=\"http", "@import"] {
        assert!(!html.contains(fetch), "self-contained, no {fetch}");
    }

    let check = python_check(&data);
    let ours = read_all(&data);
    assert_eq!(check["rows"].as_u64().unwrap(), ours.iter().sum::<u64>());
    assert!(
        ours[2] > 0,
        "the mixed run writes differently somewhere: {ours:?}"
    );
    assert!(check["files"].as_array().unwrap().len() > 2, "{check}");

    let out = bin()
        .args(["analyze", data.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let analysis: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    let exit = out.status.code().unwrap();
    let readiness = analysis["readiness"].as_str().unwrap();
    assert_eq!(
        exit,
        match readiness {
            "ready" => 0,
            "not-ready" => 1,
            _ => 3,
        },
        "{readiness}"
    );
    let mut compared = 0;
    for row in check["failures"].as_array().unwrap() {
        let plan = analysis["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["plan"] == row["plan"])
            .unwrap();
        let Some(op) = plan["operations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["operation"] == row["operation"])
        else {
            // The analysis lists the phased path's operations; the legacy loop's own ones are in
            // its findings.
            let name = row["operation"].as_str().unwrap();
            let shipped =
                shadow_reconciler::plan::embedded::load(row["plan"].as_str().unwrap()).unwrap();
            let only = shipped.lookup(name).map(|op| shipped.operation(op).only());
            assert_eq!(
                only,
                Some(Some(shadow_reconciler::vocab::CodePath::Legacy)),
                "{row} is not in the analysis"
            );
            continue;
        };
        assert_eq!(op["failures"], row["failures"], "{row} vs {op}");
        assert_eq!(op["executions"], row["executions"], "{row} vs {op}");
        compared += 1;
    }
    assert!(compared >= 20, "every operation of both plans: {compared}");
    assert!(
        check["failures"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["failures"].as_u64().unwrap() > 0),
        "the comparison covers failures, not only zeros"
    );
}

#[test]
fn files_survive_sigkill_mid_write_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = 0;
    // Kill at different moments of the run, after 1 to 5 committed steps files: files rotate
    // every few reconciles, so a kill after the k-th lands while later ones are being written.
    // Counted, not timed: the moments do not depend on the machine's speed.
    for round in 0..5 {
        let data = dir.path().join(format!("run-{round}"));
        let mut child = simulate(
            &data,
            &["--parquet-max-rows", "60", "--parquet-max-age", "1"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        wait_for(
            &format!("{} steps files written", round + 1),
            Duration::from_mins(5),
            Duration::from_millis(5),
            || match reader::files(&data, Table::Steps).map_or(0, |f| f.len()) {
                files if files > round => Ok(()),
                files => {
                    assert!(
                        child.try_wait().unwrap().is_none(),
                        "the run ended before it wrote {} files",
                        round + 1
                    );
                    Err(format!("{files} files"))
                }
            },
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let rows = read_all(&data);
        seen += reader::files(&data, Table::Steps).unwrap().len();
        // A rotation renames its writes file, then its steps file, then its reconciles file
        // (the part's commit point): a kill in between leaves that rotation's writes file, or
        // its writes and steps files, without their reconciles file, which readers skip and
        // report. Never more than the one rotation under way, never a reconciles file alone.
        let parts = reader::parts(&data).unwrap();
        let names: std::collections::BTreeSet<_> =
            parts.orphans.iter().map(|o| o.path.file_name()).collect();
        assert!(
            names.len() <= 1
                && parts
                    .orphans
                    .iter()
                    .all(|o| matches!(o.table, Table::Steps | Table::Writes)),
            "{:?}",
            parts.orphans
        );
        let steps_orphans = parts
            .orphans
            .iter()
            .filter(|o| o.table == Table::Steps)
            .count();
        assert_eq!(
            parts.pairs.len() + steps_orphans,
            reader::files(&data, Table::Steps).unwrap().len()
        );
        assert!(rows[0] == 0 || rows[1] > 0, "{rows:?}");
    }
    assert!(
        seen > 5,
        "the kills landed while files were being written: {seen} files"
    );
    // The readers analysts use agree that every visible file is whole.
    for round in 0..5 {
        let data = dir.path().join(format!("run-{round}"));
        if data.exists() {
            python_check(&data);
        }
    }
}

/// CRDs and 80 HostedClusters (some missing inputs) and 10 add-ons, through the kubeconfig.
fn populate(kubeconfig: &Path) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(
            config,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        shadow_reconciler::scenario::population::create_crds(&client)
            .await
            .unwrap();
        let mut rng = shadow_reconciler::util::Rng::new(9);
        shadow_reconciler::scenario::population::create(
            &client,
            shadow_reconciler::scenario::population::Faults::of(
                shadow_reconciler::scenario::Scenario::MissingSecrets,
            ),
            80,
            10,
            &mut rng,
        )
        .await
        .unwrap();
    });
}

#[test]
fn run_loses_no_accepted_record_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let data = dir.path().join("data");
    let mut server = bin()
        .args([
            "sim",
            "serve",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.starts_with("serving"), "{first}");
    populate(&kubeconfig);
    // The logs go to a file: a pipe nobody reads while waiting would fill and stall the process.
    let log_path = dir.path().join("run.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut controller = bin()
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--parquet-dir",
            data.to_str().unwrap(),
            "--parquet-max-age",
            "1",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // SIGTERM while reconciles are in full flow: once the first file is committed.
    wait_for(
        "a reconciles file written",
        Duration::from_mins(1),
        Duration::from_millis(50),
        || match reader::files(&data, Table::Reconciles) {
            Ok(files) if !files.is_empty() => Ok(()),
            Ok(_) => Err("no file".to_owned()),
            Err(e) => Err(e.to_string()),
        },
    );
    let (line, accepted, written, lost) = terminate(&mut controller, &log_path, 0);
    assert!(accepted > 0, "{line}");
    assert_eq!(accepted, written, "{line}");
    assert_eq!(lost, 0, "{line}");
    assert_eq!(
        read_all(&data)[0],
        written,
        "every written record is on disk: {line}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
}

/// Sends SIGTERM to `child`, checks its exit code, and returns the `parquet: A records accepted,
/// W written to DIR in F files (D dropped, E write errors, L lost)` line of its log with A, W, L.
fn terminate(
    child: &mut std::process::Child,
    log: &Path,
    expected_code: i32,
) -> (String, u64, u64, u64) {
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let code = child.wait().unwrap().code();
    let logs = std::fs::read_to_string(log).unwrap();
    assert_eq!(code, Some(expected_code), "{logs}");
    let line = logs
        .lines()
        .find(|l| l.starts_with("parquet: "))
        .unwrap_or_else(|| panic!("no summary line: {logs}"))
        .to_owned();
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let (accepted, written, lost) = (numbers[0], numbers[1], *numbers.last().unwrap());
    (line, accepted, written, lost)
}

/// The metrics endpoint's address, from the `metrics at http://ADDR/metrics` line in `log`.
fn metrics_address(log: &Path) -> String {
    wait_for(
        "the metrics line",
        Duration::from_mins(1),
        Duration::from_millis(50),
        || {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            match text.split("metrics at http://").nth(1) {
                Some(rest) => Ok(rest.split('/').next().unwrap().to_owned()),
                None => Err(format!("the log: {text}")),
            }
        },
    )
}

/// The sum of `shadow_reconciler_reconciles_total` scraped from `address`.
fn reconciles_so_far(address: &str) -> f64 {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return 0.0;
    };
    let _ = write!(stream, "GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    body.lines()
        .filter(|l| l.starts_with("shadow_reconciler_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn simulate_interrupted_by_sigterm_still_writes_what_it_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_path = dir.path().join("simulate.log");
    // Files rotate only after a minute: whatever is on disk was flushed by the interruption.
    // A population large enough that the run is far from settled at 20 reconciles, and no
    // deadline: the signal comes while it runs, however loaded the machine.
    let mut child = bin()
        .args(["simulate", "--hosted-clusters", "1000", "--addons", "200"])
        .args([
            "--seed",
            "4",
            "--duration",
            "600",
            "--parquet-max-age",
            "60",
        ])
        .arg("--parquet-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let address = metrics_address(&log_path);
    // A bound for a broken run only, however loaded the machine.
    wait_for(
        "20 reconciles",
        Duration::from_mins(5),
        Duration::from_millis(50),
        || match reconciles_so_far(&address) {
            n if n >= 20.0 => Ok(()),
            n => Err(format!("{n} reconciles")),
        },
    );
    let (line, accepted, written, lost) = terminate(&mut child, &log_path, 130);
    assert!(accepted >= 20, "{line}");
    assert_eq!((written, lost), (accepted, 0), "{line}");
    assert_eq!(read_all(&data)[0], written, "{line}");
}

#[test]
fn pyarrow_and_duckdb_read_the_rollout_drivers_record_as_our_reader_does() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("shadow-data");
    // The scenario's default population: the steps need their objects.
    let out = bin()
        .args([
            "simulate",
            "--scenario",
            "rollout",
            "--seed",
            "4",
            // A bound for a broken run, not a speed target: on a loaded machine the default
            // 60 s can end the run before its rollouts start.
            "--duration",
            "600",
            "--parquet-dir",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let rows = shadow_reconciler::dataset::rollouts::read(
        &shadow_reconciler::dataset::Location::Local(data.clone()),
    )
    .unwrap();
    let mut ours: Vec<serde_json::Value> = Vec::new();
    let mut names: Vec<&str> = rows.iter().map(|r| r.rollout.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let mine: Vec<_> = rows.iter().filter(|r| r.rollout == name).collect();
        let failed: usize = mine
            .iter()
            .map(|r| {
                let gates: Vec<serde_json::Value> = serde_json::from_str(&r.gates).unwrap();
                gates.iter().filter(|g| g["result"] == "Failed").count()
            })
            .sum();
        let decisions: Vec<&str> = mine
            .iter()
            .map(|r| r.decision.as_str())
            .filter(|d| !d.is_empty())
            .collect();
        ours.push(serde_json::json!({
            "rollout": name,
            "group": mine[0].group,
            "rounds": mine.len(),
            "decisions": decisions.join(","),
            "phase": mine.last().unwrap().phase,
            "failed_gates": failed,
        }));
    }
    // The scenario's story: one group completed, the other rolled back by a failed gate.
    assert!(
        ours.iter().any(|r| r["phase"] == "Completed")
            && ours
                .iter()
                .any(|r| r["phase"] == "RolledBack" && r["failed_gates"].as_u64() > Some(0)),
        "{ours:#?}"
    );
    let check = python_check(&data);
    assert_eq!(check["rollouts"], serde_json::Value::Array(ours));
}

/// The bytes of every file of the dataset's tables under `dir` (not its lock or marker).
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut todo: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("table=")
        })
        .collect();
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                todo.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

/// The reconciles `analyze --format json` counts in `dir`.
fn analysed_reconciles(dir: &Path) -> u64 {
    let out = bin()
        .args(["analyze", dir.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let analysis: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    analysis["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reconciles"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_run_past_its_size_bound_keeps_whole_parts_that_analyze_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (all, bounded) = (dir.path().join("all"), dir.path().join("bounded"));
    // The default population, in files of 200 step rows: a few MiB.
    let run = |dir: &Path, extra: &[&str]| {
        bin()
            .args([
                "simulate",
                "--seed",
                "4",
                "--parquet-max-rows",
                "200",
                "--parquet-dir",
            ])
            .arg(dir)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&all, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let whole = bytes_under(&all);
    assert!(
        whole > 2 << 20,
        "the run wrote {whole} bytes: too few for a bound of 1 MiB to remove anything"
    );
    let out = run(&bounded, &["--parquet-max-total-mib", "1"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("parquet: retention removed "))
        .unwrap_or_else(|| panic!("no retention line:\n{stderr}"));
    let left = bytes_under(&bounded);
    assert!(left <= 1 << 20, "{left} bytes left: {line}");
    assert!(
        line.ends_with(&format!("; {left} bytes left")),
        "{line} ({left} on disk)"
    );
    let parts = reader::parts(&bounded).unwrap();
    assert!(parts.orphans.is_empty(), "{:?}", parts.orphans);
    assert!(!parts.pairs.is_empty());
    let (kept, written) = (analysed_reconciles(&bounded), analysed_reconciles(&all));
    assert!(
        0 < kept && kept < written,
        "{kept} of {written} reconciles kept"
    );
    println!(
        "retention: {line}; analyze reads {kept} of the {written} reconciles of the unbounded run"
    );
}
