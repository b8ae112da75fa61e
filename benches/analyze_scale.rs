//! `analyze` at scale: a generated dataset of many files (the writer's default rotation, 262,144
//! step rows a file) over a fixed population of objects, analysed by the release binary in a
//! child process; prints the rows, files, wall time, rows per second and the process's peak RSS
//! (`VmHWM`) per size, so memory can be seen flat in rows. `docs/performance.md` records results.
//!
//! `cargo bench --bench analyze_scale` runs 25,000,000 and 100,000,000 step rows (about 1.3 GB of
//! Parquet for the larger; `BENCH_DIR` moves the data, default the system's temporary
//! directory), `-- --rows N` one size; `cargo test --benches` a 500,000-row smoke run.

#[path = "common/synthetic.rs"]
mod synthetic;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shadow_reconciler::dataset::{DatasetWriter, SinkOptions};
use shadow_reconciler::plan::embedded;
use shadow_reconciler::util::Rng;

/// Objects in the population: every object is reconciled again and again as rows grow.
const POPULATION: usize = 20_000;

/// Writes about `rows` step rows of synthetic reconciles into `dir`; returns (records, step rows,
/// files). With `patterns`, each object's reconciles cycle through that many failure patterns of
/// its own (where the control stops, which dry runs fail), as an object of a real controller
/// fails the same few ways again and again; without, every reconcile draws its own (the
/// analyzer's worst case: the runs it keeps grow with the reconciles, to their bound).
fn generate(dir: &Path, rows: u64, patterns: Option<u64>) -> (u64, u64, u64) {
    let plan = embedded::load("hostedcluster").expect("shipped plan");
    let mut writer = DatasetWriter::new(dir, &SinkOptions::default());
    let mut rng = Rng::new(11);
    // Every record holds both policies' rows for every operation.
    let per_record = 2 * plan.len() as u64;
    for i in 0..rows.div_ceil(per_record) {
        let mut own;
        let rng = match patterns {
            // The object's `k` patterns, in turn.
            Some(k) => {
                let object = i % POPULATION as u64;
                own = Rng::new(1 + object * k + (i / POPULATION as u64) % k);
                &mut own
            }
            None => &mut rng,
        };
        let record = synthetic::record(
            &plan,
            usize::try_from(i).expect("a record index"),
            POPULATION,
            rng,
        );
        writer
            .push(&record, record.trace_id.as_deref().unwrap_or(""))
            .expect("write");
    }
    writer.rotate().expect("write");
    let stats = writer.stats();
    (stats.records, stats.step_rows, stats.files)
}

/// Runs `analyze DIR --format json` and returns (its output, wall time, peak RSS in bytes).
fn analyze(dir: &Path) -> (serde_json::Value, Duration, u64) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .arg("analyze")
        .arg(dir)
        .args(["--format", "json", "--log-format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run analyze");
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::BufReader::new(stdout), &mut text)
            .expect("read analyze's output");
        text
    });
    loop {
        // VmHWM is the high-water mark of the resident set, kept until the process is reaped.
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kib) = text
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        {
            peak = peak.max(kib * 1024);
        }
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let out = reader.join().expect("output");
    (
        serde_json::from_str(&out).expect("analyze's JSON"),
        elapsed,
        peak,
    )
}

/// Millions of rows per second.
#[allow(clippy::cast_precision_loss)] // a displayed rate: 52 bits are plenty
fn rate(rows: u64, elapsed: Duration) -> f64 {
    rows as f64 / elapsed.as_secs_f64() / 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<u64> = match args.iter().position(|a| a == "--rows") {
        Some(i) => vec![args[i + 1].parse().expect("--rows N")],
        None if args.iter().any(|a| a == "--bench") => vec![25_000_000, 100_000_000],
        None => vec![500_000],
    };
    // A few failure patterns per object, then a pattern per reconcile.
    let kinds = [(Some(4), "4 per object"), (None, "one per reconcile")];
    let base = std::env::var_os("BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    println!(
        "| failure patterns | step rows | files per table | records | generate | analyze | step rows/s | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (patterns, label) in kinds {
        for &rows in &sizes {
            measure(&base, rows, patterns, label);
        }
    }
}

/// Generates and analyses one dataset, printing its row of the table.
fn measure(base: &Path, rows: u64, patterns: Option<u64>, label: &str) {
    let dir = tempfile::Builder::new()
        .prefix("analyze-scale-")
        .tempdir_in(base)
        .expect("a scratch directory");
    let started = Instant::now();
    let (records, step_rows, files) = generate(dir.path(), rows, patterns);
    let generated = started.elapsed();
    let (analysis, elapsed, peak) = analyze(dir.path());
    let analysed: u64 = analysis["plans"]
        .as_array()
        .expect("plans")
        .iter()
        .map(|p| p["reconciles"].as_u64().expect("reconciles"))
        .sum();
    assert_eq!(analysed, records, "analyze counted every reconcile");
    assert_eq!(
        analysis["files_skipped"].as_array().map(Vec::len),
        Some(0),
        "no file skipped"
    );
    println!(
        "| {label} | {step_rows} | {} | {records} | {:.1} s | {:.2} s | {:.1} M | {} MiB |",
        files / 2,
        generated.as_secs_f64(),
        elapsed.as_secs_f64(),
        rate(step_rows, elapsed),
        peak >> 20
    );
}
