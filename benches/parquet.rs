//! Parquet throughput: step rows written per second on one core (the writer thread's work:
//! encoding, compression, files), and step rows analysed per second, side by side with DuckDB
//! running the equivalent aggregation over the same files. `docs/performance.md` records results.
//!
//! DuckDB runs from the venv `scripts/test.sh` installs (`SHADOW_RECONCILER_PYTHON`, default
//! `.venv/bin/python`); without it the comparison is reported as not run, and why.

#[path = "common/synthetic.rs"]
mod synthetic;

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use shadow_reconciler::dataset::{DatasetWriter, SinkOptions};
use shadow_reconciler::engine::ReconcileRecord;
use shadow_reconciler::plan::{ReconcilePlan, embedded};
use shadow_reconciler::util::Rng;

fn records(plan: &ReconcilePlan, n: usize) -> Vec<ReconcileRecord> {
    let mut rng = Rng::new(7);
    (0..n)
        .map(|i| synthetic::record(plan, i, 2000, &mut rng))
        .collect()
}

fn write(dir: &Path, records: &[ReconcileRecord]) -> u64 {
    let mut writer = DatasetWriter::new(dir, &SinkOptions::default());
    for r in records {
        writer
            .push(r, r.trace_id.as_deref().unwrap_or(""))
            .expect("write");
    }
    writer.rotate().expect("write");
    writer.stats().step_rows
}

fn writing(c: &mut Criterion) {
    let plan = embedded::load("hostedcluster").expect("shipped plan");
    let full = std::env::args().any(|a| a == "--bench");
    let batch = records(&plan, if full { 5_000 } else { 100 });
    let rows: usize = batch
        .iter()
        .map(|r| r.control.len() + r.candidate.len())
        .sum();
    let mut group = c.benchmark_group("parquet");
    group.throughput(Throughput::Elements(rows as u64));
    group.sample_size(10);
    group.bench_function("write step rows", |b| {
        b.iter_batched(
            || {
                tempfile::tempdir_in(
                    std::env::var("BENCH_DIR")
                        .unwrap_or_else(|_| std::env::temp_dir().display().to_string()),
                )
                .expect("tempdir")
            },
            |dir| black_box(write(dir.path(), &batch)),
            criterion::BatchSize::PerIteration,
        );
    });
    group.bench_function("encode step rows (no file)", |b| {
        b.iter(|| {
            let mut steps = shadow_reconciler::dataset::encode::StepRows::default();
            let mut reconciles = shadow_reconciler::dataset::encode::ReconcileRows::default();
            for r in &batch {
                reconciles.append(r, "x");
                steps.append(r, "x");
            }
            black_box((
                steps.finish().expect("batch"),
                reconciles.finish().expect("batch"),
            ))
        });
    });
    group.finish();
    side_by_side_with_pyarrow(&batch, rows, if full { 5 } else { 1 });
}

/// Our writer and pyarrow writing the same rows with the same settings, in `pairs` interleaved
/// pairs; prints each pair and the median ratio. pyarrow's tables are read from our first file
/// into memory before its clock starts, so it is timed on encoding and writing only, while ours
/// includes building the Arrow data from the records.
fn side_by_side_with_pyarrow(batch: &[ReconcileRecord], rows: usize, pairs: usize) {
    use std::io::{BufRead, Write};
    let python = std::env::var_os("SHADOW_RECONCILER_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
        std::path::PathBuf::from,
    );
    let base =
        std::env::var("BENCH_DIR").unwrap_or_else(|_| std::env::temp_dir().display().to_string());
    let source = tempfile::tempdir_in(&base).expect("tempdir");
    write(source.path(), batch);
    let out = tempfile::tempdir_in(&base).expect("tempdir");
    let mut child = std::process::Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/pyarrow/write.py"))
        .arg(source.path())
        .arg(out.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} for the pyarrow comparison: {e} (scripts/test.sh installs it)",
                python.display()
            )
        });
    let mut to_python = child.stdin.take().expect("stdin");
    let mut from_python = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut answer = move || {
        from_python
            .next()
            .expect("pyarrow's writer stopped: see its error above")
            .expect("read")
    };
    println!("pyarrow has the same rows in memory: {}", answer());
    #[allow(clippy::cast_precision_loss)] // row counts far below 2^52
    let per_second = |seconds: f64| rows as f64 / seconds / 1e6;
    let mut ratios = Vec::new();
    for pair in 0..pairs {
        let dir = tempfile::tempdir_in(&base).expect("tempdir");
        let started = Instant::now();
        black_box(write(dir.path(), batch));
        let ours = started.elapsed().as_secs_f64();
        writeln!(to_python, "write").expect("to pyarrow");
        let theirs: f64 = answer().trim().parse().expect("pyarrow's seconds");
        println!(
            "pair {}: ours {:.2} M rows/s ({:.1} ms), pyarrow {:.2} M rows/s ({:.1} ms), ours/pyarrow {:.2}",
            pair + 1,
            per_second(ours),
            ours * 1e3,
            per_second(theirs),
            theirs * 1e3,
            theirs / ours
        );
        ratios.push(theirs / ours);
    }
    drop(to_python);
    assert!(
        child.wait().expect("pyarrow's writer").success(),
        "pyarrow's writer failed"
    );
    ratios.sort_by(f64::total_cmp);
    println!(
        "Parquet write, ours/pyarrow (rows per second), median of {pairs} interleaved pairs: {:.2}",
        ratios[ratios.len() / 2]
    );
}

/// DuckDB running `query` (`full`: the equivalent of the analyzer's scan, `benches/duckdb/analyze.sql`;
/// `failures`: a plain group-by) over `dir`; returns its best wall time of three, or why not.
fn duckdb(dir: &Path, query: &str) -> Result<Duration, String> {
    let python = std::env::var_os("SHADOW_RECONCILER_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
        std::path::PathBuf::from,
    );
    let out = std::process::Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/duckdb/time_analyze.py"))
        .arg(dir)
        .arg(query)
        .output()
        .map_err(|e| {
            format!(
                "{}: {e} (run scripts/test.sh to install it)",
                python.display()
            )
        })?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let seconds: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| format!("unexpected output: {e}"))?;
    Ok(Duration::from_secs_f64(seconds))
}

fn analysing(c: &mut Criterion) {
    let plan = embedded::load("hostedcluster").expect("shipped plan");
    let dir = tempfile::tempdir().expect("tempdir");
    // 25,000 reconciles: 1,000,000 step rows (500 when run as a test by `cargo test`).
    let full = std::env::args().any(|a| a == "--bench");
    let rows = write(dir.path(), &records(&plan, if full { 25_000 } else { 500 }));
    let mut group = c.benchmark_group("parquet");
    group.throughput(Throughput::Elements(rows));
    group.sample_size(10);
    for threads in [1, 2] {
        group.bench_function(format!("analyze step rows ({threads} threads)"), |b| {
            b.iter(|| {
                let settings = shadow_reconciler::analyze::Settings {
                    threads,
                    ..Default::default()
                };
                black_box(
                    shadow_reconciler::analyze::analyze(
                        dir.path(),
                        std::slice::from_ref(&plan),
                        &settings,
                    )
                    .expect("analysis"),
                )
            });
        });
    }
    group.finish();
    // Our best of three, next to DuckDB's, on the same files.
    let ours = (0..3)
        .map(|_| {
            let started = Instant::now();
            let settings = shadow_reconciler::analyze::Settings::default();
            black_box(
                shadow_reconciler::analyze::analyze(
                    dir.path(),
                    std::slice::from_ref(&plan),
                    &settings,
                )
                .expect("analysis"),
            );
            started.elapsed()
        })
        .min()
        .unwrap_or_default();
    #[allow(clippy::cast_precision_loss)] // row counts far below 2^52
    let per_second = |d: Duration| rows as f64 / d.as_secs_f64().max(1e-9);
    println!(
        "analyze, all cores: {rows} step rows in {:.3} s = {:.2} M rows/s",
        ours.as_secs_f64(),
        per_second(ours) / 1e6
    );
    for (query, what) in [
        (
            "full",
            "the equivalent aggregation (benches/duckdb/analyze.sql)",
        ),
        ("failures", "failures per operation only"),
    ] {
        match duckdb(dir.path(), query) {
            Ok(d) => println!(
                "DuckDB, {what}, all cores: {rows} step rows in {:.3} s = {:.2} M rows/s",
                d.as_secs_f64(),
                per_second(d) / 1e6
            ),
            Err(why) => println!("DuckDB comparison not run: {why}"),
        }
    }
}

criterion_group!(benches, writing, analysing);
criterion_main!(benches);
