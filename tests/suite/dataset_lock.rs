//! A writer owns its dataset: one writer per dataset directory (an advisory lock naming the
//! holder), nothing deleted before every option is accepted, `simulate` never deleting or mixing
//! with data it did not write, and a lock left by a killed writer taken over. Each case runs the
//! binary as a user would, in a directory of its own; no case depends on timing: a writer that
//! must still be running when the second one comes is one that runs until it is told to stop.

use crate::common;
use crate::common::wait::wait_for;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shadow-reconciler");
const LOCK: &str = ".shadow-reconciler.lock";

/// Every file under `dir` (hidden ones included) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                found.insert(path.strip_prefix(dir).unwrap().to_owned(), bytes);
            }
        }
    }
    found
}

/// A small `simulate` in `cwd` with `extra` arguments.
fn simulate(cwd: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(cwd)
        .args([
            "simulate",
            "--hosted-clusters",
            "6",
            "--addons",
            "3",
            "--seed",
            "3",
        ])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The records a writer's closing line says it wrote: `parquet: N records accepted, N written`.
fn written(log: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.contains("records accepted, ") && l.contains(" written to "))
        .unwrap_or_else(|| panic!("no closing line of the Parquet writer in:\n{log}"));
    let accepted: u64 = line
        .split("parquet: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        line.contains(&format!("{accepted} records accepted, {accepted} written"))
            && line.contains("(0 dropped, 0 write errors, 0 lost)"),
        "every accepted record written: {line}"
    );
    accepted
}

/// A long-running writer whose stderr is collected line by line.
struct Writer {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: String,
}

impl Writer {
    fn spawn(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(BIN)
            .current_dir(cwd)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: String::new(),
        }
    }

    /// Waits for a stderr line holding `text` (a deadline only bounds a broken run).
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_mins(5);
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(why) => panic!(
                    "{why}: no line with {text:?} (exit {:?}); stderr so far:\n{}",
                    self.child.try_wait(),
                    self.seen
                ),
            }
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then the exit status and the whole stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        self.signal("TERM");
        let status = self.child.wait().unwrap();
        for line in &self.lines {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        (status, std::mem::take(&mut self.seen))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_refused_simulate_leaves_the_earlier_dataset_byte_identical() {
    let cwd = tempfile::tempdir().unwrap();
    let first = simulate(cwd.path(), &["--parquet-dir", "data", "-q"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let data = cwd.path().join("data");
    let before = snapshot(&data);
    assert!(
        before.keys().any(|p| p.starts_with("table=steps")),
        "{before:?}"
    );
    std::fs::write(cwd.path().join("bad.yaml"), "kind: ReconcilePlan\n").unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    let refused: &[(&[&str], &str)] = &[
        (
            &["--parquet-spool", "spool"],
            "--parquet-spool and --parquet-spool-max-mib apply to an object store",
        ),
        (
            &["--replace", "--parquet-spool-max-mib", "10"],
            "--parquet-spool and --parquet-spool-max-mib apply to an object store",
        ),
        (
            &[
                "--replace",
                "--mode",
                "enforce",
                "--enforce-group",
                "nosuch",
            ],
            "--enforce-group",
        ),
        (&["--replace", "--plan", "bad.yaml"], "bad.yaml"),
        (
            &["--replace", "--kubeconfig", "missing.yaml"],
            "missing.yaml",
        ),
        (
            &["--replace", "--listen", &port],
            "cannot serve the metrics endpoint",
        ),
    ];
    for (extra, says) in refused {
        let mut args = vec!["--parquet-dir", "data"];
        args.extend_from_slice(extra);
        let out = simulate(cwd.path(), &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?} should say {says:?}: {err}");
        assert!(
            snapshot(&data) == before,
            "{extra:?} changed the earlier dataset"
        );
    }
    drop(taken);

    // Accepted without --replace: written apart, beside it, and said so.
    let apart = simulate(cwd.path(), &["--parquet-dir", "data"]);
    let err = stderr(&apart);
    assert!(apart.status.success(), "{err}");
    assert!(
        err.contains("data holds an earlier run's data, left as it is; this run writes data.2"),
        "{err}"
    );
    assert!(snapshot(&data) == before, "a run beside it changed it");
    let beside = cwd.path().join("data.2");
    assert_eq!(
        common::counted_reconciles(&common::analyze_json(&beside)),
        written(&err)
    );

    // --replace replaces simulate's own data only: not a dataset another command wrote.
    std::fs::remove_file(beside.join(".shadow-reconciler-simulate")).unwrap();
    let kept = snapshot(&beside);
    let out = simulate(cwd.path(), &["--parquet-dir", "data.2", "--replace"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("holds a dataset that simulate did not write"),
        "{}",
        stderr(&out)
    );
    assert!(snapshot(&beside) == kept);
    let out = simulate(cwd.path(), &["--parquet-dir", "data", "--replace"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        common::counted_reconciles(&common::analyze_json(&data)),
        written(&stderr(&out)),
        "the replaced dataset holds this run alone"
    );
}

#[test]
fn a_second_writer_is_refused_naming_the_first_and_the_first_completes() {
    let cwd = tempfile::tempdir().unwrap();
    // The first runs until told to stop: --serve keeps it (and its lock) after the run.
    let mut first = Writer::spawn(
        cwd.path(),
        &[
            "simulate",
            "--hosted-clusters",
            "20",
            "--addons",
            "5",
            "--parquet-dir",
            "data",
            "--listen",
            "127.0.0.1:0",
            "--serve",
        ],
        &[("RUST_LOG", "warn")],
    );
    first.wait_for("metrics at http://");
    let data = cwd.path().join("data");
    // The lock is taken once the options are accepted, right after the endpoint is served.
    wait_for(
        "the first writer's lock",
        Duration::from_mins(5),
        Duration::from_millis(20),
        || match std::fs::read_to_string(data.join(LOCK)) {
            Ok(holder) if !holder.is_empty() => Ok(()),
            Ok(_) => Err(format!("{LOCK} is empty")),
            Err(e) => Err(format!("{LOCK}: {e}")),
        },
    );
    let pid = first.child.id();
    let seconds: [&[&str]; 2] = [
        &["simulate", "--parquet-dir", "data", "--replace"],
        &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--parquet-dir",
            "data",
            "--listen",
            "127.0.0.1:0",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
        ],
    ];
    for second in seconds {
        let out = Command::new(BIN)
            .current_dir(cwd.path())
            .args(second)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{second:?}: {err}");
        assert!(
            err.contains(
                "data is being written by `shadow-reconciler simulate --hosted-clusters 20",
            ) && err.contains(&format!("(pid {pid} on "))
                && err.contains("one writer per dataset directory"),
            "{second:?}: {err}"
        );
    }
    first.wait_for("still serving");
    let (status, log) = first.stop();
    assert!(status.success(), "{log}");
    assert_eq!(
        common::counted_reconciles(&common::analyze_json(&data)),
        written(&log),
        "the first writer's data is whole"
    );
    assert_eq!(
        std::fs::read_to_string(data.join(LOCK)).unwrap(),
        "",
        "released cleanly"
    );
}

#[test]
fn simulate_beside_a_live_ingest_is_refused_and_ingest_keeps_every_record() {
    let cwd = tempfile::tempdir().unwrap();
    let http = format!("127.0.0.1:{}", common::free_port());
    let mut ingest = Writer::spawn(
        cwd.path(),
        &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--plan",
            "addon-install-progression",
            "--parquet-dir",
            "fleet",
            "--listen",
            "127.0.0.1:0",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            &http,
            "--log-format",
            "json",
        ],
        &[("RUST_LOG", "info")],
    );
    ingest.wait_for("receiving OTLP traces");
    // A controller's spans reach it: here simulate's own, exported to the ingest.
    let exporter = Command::new(BIN)
        .current_dir(cwd.path())
        .args([
            "simulate",
            "--hosted-clusters",
            "6",
            "--addons",
            "3",
            "--parquet-dir",
            "own",
            "-q",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{http}"))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .output()
        .unwrap();
    assert!(exporter.status.success(), "{}", stderr(&exporter));
    // Then a simulate pointed at the directory the ingest writes.
    let fleet = cwd.path().join("fleet");
    let out = simulate(cwd.path(), &["--parquet-dir", "fleet", "--replace"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("fleet is being written by `shadow-reconciler ingest --plan hostedcluster"),
        "{err}"
    );
    assert!(
        !cwd.path().join("fleet.2").exists(),
        "nothing written apart either"
    );
    let (status, log) = ingest.stop();
    assert!(status.success(), "{log}");
    let records = written(&log);
    assert!(
        records > 0,
        "the ingest received the exported reconciles: {log}"
    );
    assert_eq!(
        common::counted_reconciles(&common::analyze_json(&fleet)),
        records,
        "every record the ingest accepted is in its dataset"
    );
}

#[test]
fn a_lock_left_by_a_killed_writer_is_taken_over() {
    let cwd = tempfile::tempdir().unwrap();
    let args = [
        "ingest",
        "--plan",
        "hostedcluster",
        "--parquet-dir",
        "data",
        "--listen",
        "127.0.0.1:0",
        "--otlp-grpc",
        "127.0.0.1:0",
        "--otlp-http",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ];
    let mut killed = Writer::spawn(cwd.path(), &args, &[("RUST_LOG", "info")]);
    killed.wait_for("receiving OTLP traces");
    let lock = cwd.path().join("data").join(LOCK);
    let left = std::fs::read_to_string(&lock).unwrap();
    assert!(
        left.contains(&format!("pid: {}\n", killed.child.id())),
        "{left}"
    );
    killed.signal("KILL");
    let _ = killed.child.wait();
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        left,
        "a killed writer leaves its lock file filled"
    );
    let mut next = Writer::spawn(cwd.path(), &args, &[("RUST_LOG", "info")]);
    next.wait_for("took over the dataset's lock from a writer that ended without releasing it");
    next.wait_for("receiving OTLP traces");
    let now = std::fs::read_to_string(&lock).unwrap();
    assert!(
        now.contains(&format!("pid: {}\n", next.child.id())),
        "{now}"
    );
    let (status, log) = next.stop();
    assert!(status.success(), "{log}");
}
