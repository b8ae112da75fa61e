//! The Parquet sink in process: layout and round trip, redaction, backpressure with a stalled
//! writer, an unwritable directory, shutdown, and the analyzer skipping unreadable files.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use shadow_reconciler::dataset::{ParquetSink, ShutdownError, SinkConfig, Table, reader};
use shadow_reconciler::engine::{ObjectKey, ReconcileRecord, Sink, StepRecord};
use shadow_reconciler::plan::PlanHash;
use shadow_reconciler::vocab::{Category, ErrorClass, Execution, Mode};

use crate::common::wait::wait_for;

const SECRET: &str = "c2VjcmV0LXB1bGwtc2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA=";

fn step(operation: &str, outcome: &'static str, execution: Execution) -> StepRecord {
    StepRecord {
        operation: operation.into(),
        phase: 6,
        category: Category::NonCritical,
        execution,
        outcome,
        error_class: (outcome == "failed").then_some(ErrorClass::Invalid),
        message: (outcome == "failed").then(|| {
            format!("Secret \"ssh\" is invalid: data[key]: Invalid value: \"{SECRET}\": bad")
        }),
        blocked_by: if outcome == "skipped" {
            vec!["SSHKeySync".into()]
        } else {
            Vec::new()
        },
        offset: Duration::from_micros(10),
        duration: Duration::from_micros(250),
        conflicts: 0,
        conflict: None,
    }
}

/// A shadow record: `SSHKeySync` fails in the control, the candidate runs what it skipped.
fn record(i: usize) -> ReconcileRecord {
    let control = vec![
        step("PullSecretSync", "succeeded", Execution::Real),
        step("SSHKeySync", "failed", Execution::Real),
        step("CoreHCPChain", "skipped", Execution::NotRun),
    ];
    let candidate = vec![
        step("PullSecretSync", "succeeded", Execution::Reused),
        step("SSHKeySync", "failed", Execution::Reused),
        step("CoreHCPChain", "succeeded", Execution::DryRun),
    ];
    ReconcileRecord {
        object: ObjectKey {
            kind: "HostedCluster".into(),
            namespace: Some("clusters".into()),
            name: format!("hc-{i}"),
            uid: Some(format!("uid-{i}")),
        },
        plan: "hostedcluster".into(),
        plan_hash: PlanHash::from_hex(&"ab".repeat(32)).unwrap(),
        mode: Mode::Shadow,
        flag: None,
        started_at: SystemTime::now(),
        duration: Duration::from_millis(3),
        control,
        candidate,
        unblocked: vec!["CoreHCPChain".into()],
        newly_blocked: Vec::new(),
        changed: Vec::new(),
        control_first_failure: Some("SSHKeySync".into()),
        control_error: Some(format!("Invalid value: \"{SECRET}\"")),
        candidate_error: None,
        trace_id: Some(format!("{i:032x}")),
        guard_refusals: 0,
        dry_run_requests: 1,
        write_differences: Vec::new(),
        cancelled: false,
        comparison_skipped: None,
    }
}

fn rows(dir: &Path, table: Table, column: &str) -> Vec<arrow_array::RecordBatch> {
    reader::files(dir, table)
        .unwrap()
        .iter()
        .flat_map(|f| reader::open(f, &[column]).unwrap().map(Result::unwrap))
        .collect()
}

fn count(dir: &Path, table: Table) -> usize {
    rows(dir, table, "reconcile_id")
        .iter()
        .map(arrow_array::RecordBatch::num_rows)
        .sum()
}

fn small(dir: &Path) -> SinkConfig {
    let mut config = SinkConfig::new(dir);
    config.options.row_group_rows = 30;
    config.options.max_file_rows = 120;
    config.backoff = Duration::from_millis(20);
    config.max_backoff = Duration::from_millis(100);
    config
}

#[test]
fn records_land_in_hive_partitions_whole_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let sink = ParquetSink::start(small(dir.path()), None);
    for i in 0..100 {
        sink.record(&record(i));
    }
    let stats = sink.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(
        (stats.accepted, stats.written, stats.dropped),
        (100, 100, 0)
    );
    assert_eq!(count(dir.path(), Table::Reconciles), 100);
    assert_eq!(count(dir.path(), Table::Steps), 600);
    let files = reader::files(dir.path(), Table::Steps).unwrap();
    assert_eq!(
        files.len() as u64 * 3,
        stats.files,
        "one file per table per rotation (writes too, empty when nothing was written differently)"
    );
    assert!(files.len() >= 5, "rotated by rows: {files:?}");
    let relative = files[0]
        .strip_prefix(dir.path())
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let parts: Vec<&str> = relative.split('/').collect();
    assert_eq!(parts[0], "table=steps");
    assert_eq!(parts[1], "cluster=default", "the cluster when none is set");
    assert!(
        parts[2].starts_with("date=") && parts[2].len() == "date=2026-11-29".len(),
        "{relative}"
    );
    assert!(
        parts[3].starts_with("hour=") && parts[3].len() == "hour=18".len(),
        "{relative}"
    );
    assert!(
        parts[4].starts_with("part-") && parts[4].ends_with(".parquet"),
        "{relative}"
    );
    // No secret value left the process; the message says what was wrong.
    for (table, column) in [
        (Table::Steps, "message"),
        (Table::Reconciles, "control_error"),
    ] {
        for batch in rows(dir.path(), table, column) {
            let text = format!("{:?}", batch.column(0));
            assert!(!text.contains(SECRET), "{text}");
            if table == Table::Steps {
                assert!(text.contains("Invalid value: \\\"[redacted]\\\""), "{text}");
            }
        }
    }
    assert!(matches!(
        sink.shutdown(Duration::from_secs(1)),
        Err(ShutdownError::AlreadyShutDown)
    ));
    sink.record(&record(0));
    assert_eq!(
        sink.stats().dropped,
        1,
        "after shutdown a record is dropped and counted"
    );
}

#[test]
fn a_stalled_writer_never_blocks_a_reconcile_and_drops_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small(dir.path());
    config.options.capacity = 64;
    let registry = prometheus::Registry::new();
    let dropped = prometheus::IntCounter::new("dropped", "d").unwrap();
    let files = prometheus::IntCounter::new("files", "f").unwrap();
    let errors = prometheus::IntCounter::new("errors", "e").unwrap();
    registry.register(Box::new(dropped.clone())).unwrap();
    let health = shadow_reconciler::dataset::HealthCounters {
        dropped: dropped.clone(),
        files: files.clone(),
        errors,
        retention: None,
    };
    let sink = ParquetSink::start(config, Some(health));
    sink.pause();
    let records: Vec<_> = (0..2000).map(record).collect();
    // The calls return with the writer paused, which it stays until the test resumes it: a call
    // that waited for the writer would never return, and the bound (for that case only) says so
    // instead of hanging.
    std::thread::scope(|s| {
        let (done, returned) = std::sync::mpsc::channel();
        let (sink, records) = (&sink, &records);
        s.spawn(move || {
            for r in records {
                sink.record(r);
            }
            let _ = done.send(());
        });
        let returned = returned.recv_timeout(Duration::from_mins(1)).is_ok();
        if !returned {
            sink.resume();
        }
        assert!(returned, "record() waited for the paused writer");
    });
    let stats = sink.stats();
    assert_eq!(stats.accepted + stats.dropped, 2000);
    assert!(
        stats.accepted <= 65,
        "the channel holds 64 (plus one in the writer's hands): {stats:?}"
    );
    assert_eq!(dropped.get(), stats.dropped, "the metric matches");
    sink.resume();
    let stats = sink.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(stats.written, stats.accepted);
    assert_eq!(
        count(dir.path(), Table::Reconciles) as u64,
        2000 - dropped.get(),
        "exactly the records not dropped reached disk"
    );
    assert_eq!(files.get(), stats.files);
}

/// `ingest`'s setting: a record waits for room (its exporter's request with it) rather than being
/// dropped, for at most `wait_when_full`, then it is dropped and counted as before.
#[test]
fn a_sink_that_may_wait_holds_records_until_the_writer_makes_room() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small(dir.path());
    config.options.capacity = 4;
    config.options.wait_when_full = Duration::from_mins(5);
    let sink = std::sync::Arc::new(ParquetSink::start(config, None));
    sink.pause();
    let sender = {
        let sink = sink.clone();
        std::thread::spawn(move || (0..6).for_each(|i| sink.record(&record(i))))
    };
    wait_for(
        "four records accepted",
        Duration::from_mins(1),
        Duration::from_millis(5),
        || match sink.stats() {
            stats if stats.accepted >= 4 => Ok(()),
            stats => Err(format!("{stats:?}")),
        },
    );
    // Four in the channel and at most one in the paused writer's hands: the sixth must wait.
    assert_eq!(sink.stats().dropped, 0);
    assert!(
        !sender.is_finished(),
        "the sixth record found room with the writer paused"
    );
    sink.resume();
    sender.join().unwrap();
    let stats = sink.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!((stats.accepted, stats.dropped, stats.written), (6, 0, 6));
    assert_eq!(count(dir.path(), Table::Reconciles), 6);

    // The wait is bounded: past it, dropped and counted.
    let dir = tempfile::tempdir().unwrap();
    let mut config = small(dir.path());
    config.options.capacity = 2;
    config.options.wait_when_full = Duration::from_millis(50);
    let sink = ParquetSink::start(config, None);
    sink.pause();
    for i in 0..6 {
        let started = Instant::now();
        let dropped = sink.stats().dropped;
        sink.record(&record(i));
        if sink.stats().dropped > dropped {
            assert!(
                started.elapsed() >= Duration::from_millis(50),
                "dropped before the wait"
            );
        }
    }
    let stats = sink.stats();
    assert_eq!(stats.accepted + stats.dropped, 6);
    assert!(stats.dropped >= 3, "{stats:?}");
    sink.resume();
    assert_eq!(
        sink.shutdown(Duration::from_secs(10)).unwrap().written,
        stats.accepted
    );
}

#[test]
fn an_unwritable_directory_is_reported_and_retried_until_it_heals() {
    let dir = tempfile::tempdir().unwrap();
    // A regular file where the dataset's directory should be: every create fails (even as root).
    let blocker = dir.path().join("blocked");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let sink = ParquetSink::start(small(&blocker.join("data")), None);
    for i in 0..10 {
        sink.record(&record(i));
    }
    assert!(
        !sink.flush(Duration::from_millis(500)),
        "the flush cannot succeed yet"
    );
    let stats = wait_for(
        "the failed write reported and retried",
        Duration::from_mins(1),
        Duration::from_millis(20),
        || match sink.stats() {
            stats if stats.errors >= 2 => Ok(stats),
            stats => Err(format!("{stats:?}")),
        },
    );
    assert_eq!(stats.written, 0);
    std::fs::remove_file(&blocker).unwrap();
    assert!(
        sink.flush(Duration::from_secs(10)),
        "the retry succeeds once the disk heals"
    );
    let stats = sink.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!((stats.written, stats.lost), (10, 0), "{stats:?}");
    let data = blocker.join("data");
    assert_eq!(count(&data, Table::Reconciles), 10);
    // The steps' row groups (of 30 rows: two, encoded before the first attempt) were written
    // from what the failed attempts left: every record's six rows, once.
    let mut ids: Vec<String> = rows(&data, Table::Steps, "reconcile_id")
        .iter()
        .flat_map(|batch| {
            let column = batch.column(0);
            let strings = arrow_array::cast::AsArray::as_string::<i32>(column);
            strings
                .iter()
                .flatten()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(ids.len(), 60);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10);
}

#[test]
fn a_failing_disk_at_shutdown_gives_up_at_the_deadline_and_counts_the_loss() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocked");
    std::fs::write(&blocker, b"").unwrap();
    let sink = ParquetSink::start(small(&blocker.join("data")), None);
    for i in 0..5 {
        sink.record(&record(i));
    }
    let started = Instant::now();
    let result = sink.shutdown(Duration::from_millis(600));
    // Bounded by the grace period, not by the stalled disk (a generous bound: the machine may
    // be loaded).
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "bounded by the grace period"
    );
    match result {
        Ok(stats) => assert_eq!(stats.lost, 5, "{stats:?}"),
        Err(ShutdownError::GraceExpired { pending, .. }) => assert!(pending <= 5),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_analyzer_skips_corrupt_and_partial_files_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let sink = ParquetSink::start(small(dir.path()), None);
    for i in 0..60 {
        sink.record(&record(i));
    }
    sink.shutdown(Duration::from_secs(10)).unwrap();
    let plan = shadow_reconciler::plan::embedded::load("hostedcluster").unwrap();
    // The records carry a made-up plan hash: analyse them as that plan's other version first.
    let settings = shadow_reconciler::analyze::Settings::default();
    let err =
        shadow_reconciler::analyze::analyze(dir.path(), std::slice::from_ref(&plan), &settings)
            .unwrap_err();
    assert!(
        err.to_string()
            .contains("another version of plan hostedcluster"),
        "{err}"
    );

    // Broken parts: both tables' files present (so the part is whole by name), but unreadable.
    for table in Table::ALL {
        let files = reader::files(dir.path(), table).unwrap();
        let good = std::fs::read(&files[0]).unwrap();
        let partition = files[0].parent().unwrap();
        std::fs::write(
            partition.join("part-truncated.parquet"),
            &good[..good.len() / 2],
        )
        .unwrap();
        std::fs::write(partition.join("part-garbage.parquet"), b"PAR1 not really").unwrap();
        // A writer's temporary file is not a committed file: never read.
        std::fs::write(partition.join(".part-x.parquet.tmp"), b"partial").unwrap();
    }
    let scanned = shadow_reconciler::analyze::scan::scan(dir.path(), &[plan], 2, &[]).unwrap();
    let skipped: Vec<String> = scanned
        .skipped
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        skipped,
        [
            "part-garbage.parquet",
            "part-truncated.parquet",
            "part-garbage.parquet",
            "part-truncated.parquet",
            "part-garbage.parquet",
            "part-truncated.parquet"
        ],
        "{:?}",
        scanned.skipped
    );
    assert!(scanned.skipped.iter().all(|s| !s.error.is_empty()));
    assert_eq!(
        scanned.other_versions[0],
        60 + 360,
        "the readable files counted once, the broken ones not at all"
    );
}

/// The columns `docs/parquet.md` lists for `table` as (name, nullable), in order.
fn documented(doc: &str, table: Table) -> Vec<(String, bool)> {
    let heading = format!("## Table `{}`", table.as_str());
    let section = doc.split(&heading).nth(1).unwrap_or("");
    let section = section.split("\n## ").next().unwrap_or("");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                cells[1].trim_matches('`').to_owned(),
                cells[2].contains("nullable"),
            )
        })
        .collect()
}

fn schema_columns(table: Table) -> Vec<(String, bool)> {
    table
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.is_nullable()))
        .collect()
}

#[test]
fn docs_parquet_md_lists_exactly_the_columns_written() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/parquet.md")).unwrap();
    for table in Table::ALL {
        assert_eq!(
            documented(&doc, table),
            schema_columns(table),
            "docs/parquet.md, table {}",
            table.as_str()
        );
    }
    // The comparison can fail: a doc missing a column, or calling a required column nullable.
    let broken = doc.replacen("| `seq` | uint32 |", "| `sequence` | uint32 |", 1);
    assert_ne!(
        documented(&broken, Table::Steps),
        schema_columns(Table::Steps)
    );
    let broken = doc.replacen("| `plan` | string |", "| `plan` | string, nullable |", 1);
    assert_ne!(
        documented(&broken, Table::Reconciles),
        schema_columns(Table::Reconciles)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_writer_stalled_the_controllers_reconcile_as_usual() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small(dir.path());
    config.options.capacity = 16;
    let sink = std::sync::Arc::new(ParquetSink::start(config, None));
    sink.pause();
    let settings = shadow_reconciler::scenario::Settings {
        hosted_clusters: 30,
        addons: 4,
        scenario: shadow_reconciler::scenario::Scenario::MissingSecrets,
        seed: 3,
        duration: Duration::from_mins(10),
        progress: false,
        parquet: Some(sink.clone()),
        ..shadow_reconciler::scenario::Settings::default()
    };
    let summary = shadow_reconciler::scenario::run(&settings).await.unwrap();
    let reconciles: u64 = summary.reconciles.values().sum();
    // Every object was reconciled and the run settled well before its deadline: nothing waited
    // for the stalled disk.
    assert!(reconciles >= 34, "{summary}");
    assert!(summary.settled, "{summary}");
    let stats = sink.stats();
    assert_eq!(stats.accepted + stats.dropped, reconciles, "{stats:?}");
    assert!(stats.accepted <= 17, "{stats:?}");
    sink.resume();
    let stats = tokio::task::spawn_blocking(move || sink.shutdown(Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        count(dir.path(), Table::Reconciles) as u64,
        reconciles - stats.dropped,
        "what was not dropped is on disk, and only that"
    );
}

/// Part of a rotation (a writer killed between committing the tables' files) is never counted:
/// `analyze` skips and reports the orphans (the writes and steps files renamed before the
/// reconciles file); the next writer completes a part whose reconciles file was prepared whole,
/// and removes the old orphans of a part whose reconciles file never was.
#[test]
fn half_rotations_are_reported_never_counted_and_repaired_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let sink = ParquetSink::start(small(dir.path()), None);
    for i in 0..240 {
        sink.record(&record(i));
    }
    sink.shutdown(Duration::from_secs(10)).unwrap();
    let whole = reader::parts(dir.path()).unwrap();
    assert!(whole.orphans.is_empty(), "{:?}", whole.orphans);
    let reconciles = reader::files(dir.path(), Table::Reconciles).unwrap();
    assert!(reconciles.len() >= 2, "{reconciles:?}");
    let plan = shadow_reconciler::plan::embedded::load("hostedcluster").unwrap();
    let before =
        shadow_reconciler::analyze::scan::scan(dir.path(), std::slice::from_ref(&plan), 2, &[])
            .unwrap()
            .other_versions[0];

    // A crash after the steps rename, with the reconciles file prepared whole: hide it back
    // under its temporary name.
    let first = &reconciles[0];
    let name = first.file_name().unwrap().to_str().unwrap().to_owned();
    let prepared = first.with_file_name(format!(".{name}.tmp"));
    std::fs::rename(first, &prepared).unwrap();
    // A crash before the reconciles file was whole: a second part loses it entirely.
    let second = &reconciles[1];
    std::fs::remove_file(second).unwrap();

    let scanned =
        shadow_reconciler::analyze::scan::scan(dir.path(), std::slice::from_ref(&plan), 2, &[])
            .unwrap();
    assert_eq!(scanned.skipped.len(), 4, "{:?}", scanned.skipped);
    assert!(
        scanned.skipped.iter().all(|s| {
            let path = s.path.to_string_lossy();
            s.error.contains("part of a rotation")
                && (path.contains("table=steps") || path.contains("table=writes"))
        }),
        "{:?}",
        scanned.skipped
    );
    assert!(
        scanned.other_versions[0] < before,
        "the orphans' rows are not counted: {} of {before}",
        scanned.other_versions[0]
    );

    // The next writer completes the first part at once; the second orphan is removed once it is
    // old enough that no live writer can still be committing it (here: at once).
    let (completed, removed) =
        shadow_reconciler::dataset::repair::repair_half_rotations(dir.path(), Duration::ZERO);
    // Orphan files: the first part's steps and writes files completed, the second's removed.
    assert_eq!((completed, removed), (2, 2));
    assert!(first.exists());
    let repaired = reader::parts(dir.path()).unwrap();
    assert!(repaired.orphans.is_empty(), "{:?}", repaired.orphans);
}
