//! Crashes: `simulate` and `run` writing Parquet with small, fast rotations, each killed
//! (SIGKILL) at random moments 100 times (half of them early, while the process starts or
//! writes its first files; half at random once it has committed data, so that the test does not
//! depend on the machine's speed) (`run` against `sim serve`, restarted after each kill as
//! a Deployment's pod would be). After every kill the dataset must be whole as readers take it:
//! every part both tables hold (`reader::parts`) is readable, every reconcile of it has its step
//! rows and every step row its reconcile; `analyze` reads it without error, and any half of a
//! rotation the kill left is reported, never counted. pyarrow then reads every dataset the same
//! way (`tests/python/check_crashed.py`) and must find the same. Then the next writer repairs
//! what the kills left.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::wait::wait_for;
use shadow_reconciler::dataset::reader;

const KILLS: usize = 100;

/// A small deterministic generator for the kill times (no dependency on the clock).
struct Draws(u64);

impl Draws {
    fn next_millis(&mut self, from: u64, to: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        from + self.0 % (to - from)
    }
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
}

/// What the kills left, over all of them.
#[derive(Default)]
struct Findings {
    half_rotations: usize,
    with_data: usize,
    /// Kills of a process still running.
    live_kills: usize,
    reconciles: usize,
}

/// Checks the dataset one kill left, before any repair.
fn check_after_kill(dir: &Path, label: &str, findings: &mut Findings) {
    let parts = reader::parts(dir).expect("list the dataset");
    findings.half_rotations += parts.orphans.len();
    // Part by part: every reconcile of a part has its step rows in that part, and every step
    // row its reconcile.
    let mut reconciles = 0;
    for (reconciles_file, steps_file) in &parts.pairs {
        let (r, s) = (
            common::reconcile_ids(reconciles_file),
            common::reconcile_ids(steps_file),
        );
        assert_eq!(
            r,
            s,
            "{label}: part {} and its steps differ",
            reconciles_file.display()
        );
        reconciles += r.len();
    }
    if reconciles == 0 {
        return;
    }
    findings.with_data += 1;
    findings.reconciles += reconciles;
    let doc = common::analyze_json(dir);
    let skipped = doc["files_skipped"].as_array().map_or(0, Vec::len);
    assert_eq!(
        skipped,
        parts.orphans.len(),
        "{label}: analyze skips exactly the half rotations: {doc}"
    );
    let counted = common::counted_reconciles(&doc);
    assert_eq!(
        counted, reconciles as u64,
        "{label}: analyze counts the whole parts' reconciles"
    );
}

/// Kills a writer `KILLS` times, each in a fresh directory, checks every dataset as Rust and
/// pyarrow read it, then repairs each as the next writer would.
fn kill_repeatedly(what: &str, seed: u64, mut start: impl FnMut(&Path, usize) -> Child) {
    let root = tempfile::tempdir().expect("temp dir");
    let mut draws = Draws(seed);
    let mut findings = Findings::default();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for kill in 0..KILLS {
        let dir = root.path().join(format!("{what}-{kill}"));
        let mut child = start(&dir, kill);
        if kill % 2 == 0 {
            // Early: while it starts, or writes its first files.
            std::thread::sleep(Duration::from_millis(draws.next_millis(50, 1500)));
        } else {
            // Once it has committed data, whatever the machine's speed: then at random while
            // it rotates.
            let no_data = |dir: &Path| reader::parts(dir).map_or(true, |p| p.pairs.is_empty());
            wait_for(
                &format!("{what}, kill {kill}: committed data"),
                Duration::from_mins(5),
                Duration::from_millis(20),
                || {
                    if !no_data(&dir) {
                        return Ok(());
                    }
                    if let Ok(Some(status)) = child.try_wait() {
                        assert!(
                            !no_data(&dir),
                            "{what}, kill {kill}: exited ({status}) without writing any data"
                        );
                        return Ok(());
                    }
                    Err("no data".to_owned())
                },
            );
            std::thread::sleep(Duration::from_millis(draws.next_millis(0, 1500)));
        }
        // A process that already ended (simulate settles within seconds) was not crashed.
        if matches!(child.try_wait(), Ok(None)) {
            findings.live_kills += 1;
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        check_after_kill(&dir, &format!("{what}, kill {kill}"), &mut findings);
        dirs.push(dir);
    }
    assert!(
        findings.live_kills >= KILLS / 2,
        "{what}: only {} of {KILLS} kills hit a running process",
        findings.live_kills
    );
    // Every other kill came after data was committed, and committed data stays.
    assert!(
        findings.with_data >= KILLS / 2,
        "{what}: only {} of {KILLS} kills found data",
        findings.with_data
    );

    // The same datasets, as pyarrow reads them.
    let existing: Vec<&PathBuf> = dirs.iter().filter(|d| d.exists()).collect();
    let out = Command::new(common::python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/check_crashed.py"))
        .args(&existing)
        .output()
        .expect("run check_crashed.py");
    assert!(
        out.status.success(),
        "{what}: pyarrow found a dataset that is not whole: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let py: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("check_crashed.py prints JSON");
    assert_eq!(
        py["half_rotations"].as_array().map(Vec::len),
        Some(findings.half_rotations),
        "{what}: pyarrow and the reader disagree on the half rotations: {py}"
    );
    assert_eq!(
        py["reconciles"].as_u64(),
        Some(findings.reconciles as u64),
        "{what}: pyarrow and the reader disagree on the reconciles: {py}"
    );

    // The next writer repairs: afterwards no file lacks its sibling, apart from an orphan too
    // young to be told from a live writer's (none here: the writer is dead, so the repair runs
    // with no age).
    for dir in existing {
        shadow_reconciler::dataset::repair::repair_half_rotations(dir, Duration::ZERO);
        let repaired = reader::parts(dir).expect("list the dataset");
        assert!(
            repaired.orphans.is_empty(),
            "{what}: {}: {:?}",
            dir.display(),
            repaired.orphans
        );
    }
    eprintln!(
        "{what}: {KILLS} kills ({} of a running process), {} with data, {} reconciles, {} half \
         rotations left (skipped by analyze and pyarrow, repaired)",
        findings.live_kills, findings.with_data, findings.reconciles, findings.half_rotations
    );
}

#[test]
fn a_killed_simulate_never_leaves_half_a_rotation_to_readers() {
    kill_repeatedly("simulate", 0x9e37_79b9_7f4a_7c15, |dir, kill| {
        binary()
            .args(["simulate", "--hosted-clusters", "20", "--addons", "5"])
            .args(["--seed", &kill.to_string(), "--duration", "600"])
            .args(["--parquet-max-age", "1", "--parquet-max-rows", "512"])
            .arg("--parquet-dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start simulate")
    });
}

/// `sim serve`, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_run_never_leaves_half_a_rotation_to_readers() {
    let work = tempfile::tempdir().expect("temp dir");
    let kubeconfig = work.path().join("sim.kubeconfig");
    let announced = work.path().join("sim.out");
    let _server = Server(
        binary()
            .args(["sim", "serve", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .stdout(std::fs::File::create(&announced).expect("sim.out"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start sim serve"),
    );
    wait_for(
        "sim serve serving",
        Duration::from_mins(5),
        Duration::from_millis(50),
        || match std::fs::read_to_string(&announced) {
            Ok(out) if out.contains("serving") => Ok(()),
            Ok(out) => Err(format!("its stdout: {out:?}")),
            Err(e) => Err(format!("{}: {e}", announced.display())),
        },
    );
    // Objects with missing secrets: their reconciles fail and requeue, so `run` keeps writing
    // whenever it is killed.
    let populated = binary()
        .args(["sim", "populate", "--scenario", "missing-secrets"])
        .args(["--hosted-clusters", "60", "--addons", "10", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("run sim populate");
    assert!(
        populated.status.success(),
        "sim populate: {}",
        String::from_utf8_lossy(&populated.stderr)
    );
    kill_repeatedly("run", 0x2545_f491_4f6c_dd1d, |dir, _| {
        binary()
            .args(["run", "--no-flag-watch", "--listen", "127.0.0.1:0"])
            .args(["--parquet-max-age", "1", "--parquet-max-rows", "512"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--parquet-dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start run")
    });
}
