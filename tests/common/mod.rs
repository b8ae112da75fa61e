//! Helpers shared by the integration tests: plans from inline YAML and scripted worlds.
#![allow(dead_code)] // each test binary uses a different subset

pub mod apiserver;
pub mod go_example;
pub mod hostedcluster;
pub mod node;
pub mod records;
pub mod wait;

/// A valid plan of three operations and two rollout groups, which the validation tests break
/// line by line (`tests/suite/plan_validation.rs`) and the shared plan vectors edit
/// (`tests/suite/shared_vectors.rs`). Its lines: 7 `Namespace`, 11 `PullSecret` (14 its dependsOn),
/// 16 `Deploy`, 22 the legacy order, 25 and 27 the groups.
pub const CHECKS_PLAN: &str = "\
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: checks
spec:
  operations:
    - name: Namespace
      phase: 1
      category: critical
      shadow: dry-run
    - name: PullSecret
      phase: 2
      category: critical
      dependsOn: [Namespace]
      shadow: dry-run
    - name: Deploy
      phase: 3
      category: non-critical
      gate: no-critical-failure
      shadow: skip
  legacy:
    order: [Namespace, PullSecret, Deploy]
  rollout:
    groups:
      - name: core
        operations: [Namespace, PullSecret]
      - name: rest
        operations: [Deploy]
";

use std::sync::Arc;
use std::time::Duration;

use shadow_reconciler::model::{Policy, Report, StepResult, drive};
use shadow_reconciler::plan::{ReconcilePlan, RolloutGroup, embedded};
use shadow_reconciler::vocab::{ErrorClass, OpId};

/// A plan from YAML; panics with the diagnostics if it is invalid.
pub fn plan(yaml: &str) -> Arc<ReconcilePlan> {
    Arc::new(ReconcilePlan::from_yaml("test.yaml", yaml).unwrap_or_else(|e| panic!("{e}")))
}

/// A shipped plan.
pub fn shipped(name: &str) -> Arc<ReconcilePlan> {
    Arc::new(embedded::load(name).expect("shipped plan"))
}

/// The id of the operation `name`.
pub fn id(plan: &ReconcilePlan, name: &str) -> OpId {
    plan.lookup(name)
        .unwrap_or_else(|| panic!("plan has no operation {name}"))
}

/// A scripted world: the named operations fail with `message` (class `precondition`), the rest
/// succeed. Returns the report and the names of the operations that were executed, in order.
pub fn run_failing(policy: &Policy, failing: &[(&str, &str)]) -> (Report, Vec<String>) {
    let mut executed = Vec::new();
    let report = drive(policy, |op| {
        executed.push(op.name().to_owned());
        match failing.iter().find(|(name, _)| *name == op.name()) {
            Some((_, message)) => StepResult::failed(ErrorClass::Precondition, *message),
            None => StepResult::succeeded(),
        }
    });
    (report, executed)
}

/// The phased model with every declared group enforced, named one by one (so that the group
/// lookup is exercised too).
pub fn phased_all(plan: &Arc<ReconcilePlan>) -> Policy {
    let groups: Vec<&str> = plan.groups().iter().map(RolloutGroup::name).collect();
    let policy = Policy::phased(plan.clone(), &groups).expect("declared groups");
    assert_eq!(
        policy.enforced().len(),
        plan.phased_order().len(),
        "the test plans group every operation of the phased path"
    );
    policy
}

/// A requeue request for a test.
pub const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A running simulator and a kube-rs client pointed at it, as production code would build one
/// (only the URL differs).
pub async fn start_sim(
    config: shadow_reconciler::sim::SimConfig,
) -> (shadow_reconciler::sim::Simulator, kube::Client) {
    let sim = shadow_reconciler::sim::Simulator::start(config)
        .await
        .expect("simulator starts");
    let client = client_for(&sim, |_| {});
    (sim, client)
}

/// Another kube-rs client for a running simulator, with its configuration adjusted.
pub fn client_for(
    sim: &shadow_reconciler::sim::Simulator,
    adjust: impl FnOnce(&mut kube::Config),
) -> kube::Client {
    let mut config = kube::Config::new(sim.url().parse().expect("simulator URL"));
    adjust(&mut config);
    kube::Client::try_from(config).expect("kube client")
}

/// The Kubernetes status code and reason of a kube-rs error.
pub fn api_error(error: &kube::Error) -> (u16, &str, &str) {
    match error {
        kube::Error::Api(status) => (status.code, status.reason.as_str(), status.message.as_str()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The Python of the venv `scripts/test.sh` builds from `scripts/requirements.txt` (pyarrow,
/// DuckDB, kubernetes-validate): `SHADOW_RECONCILER_PYTHON`, else `.venv/bin/python`.
pub fn python() -> std::path::PathBuf {
    let python = std::env::var_os("SHADOW_RECONCILER_PYTHON").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
        std::path::PathBuf::from,
    );
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh, which installs scripts/requirements.txt into .venv",
        python.display()
    );
    python
}

/// `analyze --format json DIR`, parsed: the document of docs/analyze.md.
pub fn analyze_json(data: &std::path::Path) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["analyze", "--format", "json"])
        .arg(data)
        .output()
        .expect("run analyze");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "analyze {} printed no JSON ({e}): {}",
            data.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The figures of `parquet: N records accepted, M written to DIR in F files (D dropped, E write
/// errors, L lost)`, the line `run` and `ingest` print once their writer has committed on
/// shutdown, found in `log`: accepted, written, dropped, errors, lost.
pub fn parquet_closing_line(log: &str) -> [u64; 5] {
    let line = log
        .lines()
        .find(|l| l.starts_with("parquet: ") && l.contains("records accepted"))
        .unwrap_or_else(|| panic!("the log has no closing Parquet line:\n{log}"));
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    // accepted, written, [directory digits...], files, dropped, errors, lost: the last three and
    // the first two are ours.
    let n = numbers.len();
    assert!(n >= 6, "unexpected Parquet line: {line}");
    [
        numbers[0],
        numbers[1],
        numbers[n - 3],
        numbers[n - 2],
        numbers[n - 1],
    ]
}

/// The reconciles `analyze`'s JSON counted, over all plans.
pub fn counted_reconciles(doc: &serde_json::Value) -> u64 {
    doc["plans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["reconciles"].as_u64())
        .sum()
}

/// The reconciles of the dataset `dir` (its `table=reconciles` files), and how many distinct
/// `reconcile_id`s they hold: equal when no reconcile was recorded twice.
pub fn reconciles_in(dir: &std::path::Path) -> (u64, u64) {
    let mut stack = vec![dir.join("table=reconciles")];
    let (mut rows, mut ids) = (0_u64, std::collections::HashSet::new());
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                let in_file = reconcile_ids(&path);
                rows += in_file.len() as u64;
                ids.extend(in_file);
            }
        }
    }
    (rows, ids.len() as u64)
}

/// The distinct `reconcile_id`s of one Parquet file of the dataset (either table).
pub fn reconcile_ids(path: &std::path::Path) -> std::collections::HashSet<String> {
    use arrow_array::{Array, StringArray};
    let mut found = std::collections::HashSet::new();
    let batches = shadow_reconciler::dataset::reader::open(path, &["reconcile_id"])
        .unwrap_or_else(|e| panic!("a committed file cannot be opened: {e}"));
    for batch in batches {
        let batch = batch.unwrap_or_else(|e| panic!("a committed file cannot be read: {e}"));
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("reconcile_id is a string column");
        for i in 0..column.len() {
            found.insert(column.value(i).to_owned());
        }
    }
    found
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A child process, killed when dropped (a failed assertion leaves no server behind).
pub struct Process(pub std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` from `addr` over plain HTTP/1.0: the whole response, or "" when nothing answers.
pub fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// A real component the tests run, built or fetched by a script of `scripts/`: the path in the
/// variable `env` (what `scripts/test.sh` exports), else what `script` prints (it builds the
/// component once per machine, reporting its progress on stderr).
pub fn built_tool(env: &str, script: &str) -> std::path::PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return std::path::PathBuf::from(path);
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts").join(script))
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} could not provide it (see above); or set {env}"
    );
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A loopback port free a moment ago, for a server started as a child process.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free loopback port")
        .local_addr()
        .expect("its address")
        .port()
}

/// The analyzer's honesty invariants on one plan's report: a verdict other than inconclusive, and
/// a detected dependency, rest on at least `min_samples` objects; each verdict's reason belongs
/// to its verdict; an inconclusive verdict says how many objects are missing.
pub fn assert_honest(report: &shadow_reconciler::analyze::PlanReport, min_samples: u64) {
    use shadow_reconciler::analyze::{Reason, Verdict};
    for v in &report.verdicts {
        let expected = match v.reason {
            Reason::HarmsLater | Reason::UndeclaredDependency => Verdict::Contradicted,
            Reason::FailureHarmless | Reason::NothingToBlock | Reason::Exercised => {
                Verdict::Supported
            }
            Reason::NotExercised | Reason::ResolvedByRetry | Reason::TooFewObjects => {
                Verdict::Inconclusive
            }
        };
        assert_eq!(v.verdict, expected, "reason and verdict disagree: {v:?}");
        match v.verdict {
            Verdict::Inconclusive => assert_eq!(
                v.objects_needed,
                min_samples.saturating_sub(v.objects),
                "{v:?}"
            ),
            Verdict::Supported => {
                assert!(
                    v.objects >= min_samples,
                    "supported on too few objects: {v:?}"
                );
            }
            Verdict::Contradicted => {}
        }
    }
    for d in &report.dependencies {
        assert!(
            d.after.objects >= min_samples && d.baseline.objects >= min_samples,
            "a dependency on too few objects: {d:?}"
        );
        assert!(d.separated && !d.declared && d.dependency, "{d:?}");
    }
    // A contradiction rests on a detected dependency (itself on enough objects).
    for v in report
        .verdicts
        .iter()
        .filter(|v| v.verdict == Verdict::Contradicted)
    {
        assert!(
            report
                .dependencies
                .iter()
                .any(|d| d.failed == v.operation || d.later == v.operation),
            "contradicted without a dependency: {v:?}"
        );
    }
}

/// One object of a synthetic world: which operations its own faults make fail, and how often it
/// is reconciled.
#[derive(Clone, Debug)]
pub struct Object {
    /// Operations that fail for this object, by name.
    pub faults: Vec<&'static str>,
    /// Reconciles of it.
    pub reconciles: usize,
    /// Operations that fail for it too from its second reconcile on (a fault that appears on
    /// retries only).
    pub retry_faults: Vec<&'static str>,
    /// Operations that have nothing to do for it (a branch it does not take) where they do not
    /// fail.
    pub idle: Vec<&'static str>,
}

impl Object {
    /// An object with `faults`, reconciled `reconciles` times.
    pub fn new(faults: &[&'static str], reconciles: usize) -> Self {
        Self {
            faults: faults.to_vec(),
            reconciles,
            retry_faults: Vec::new(),
            idle: Vec::new(),
        }
    }
}

/// A world's truth: `(failed, later)`: `later` fails whenever `failed` failed.
pub type Truth = &'static [(&'static str, &'static str)];

fn world(plan: &ReconcilePlan, object: &Object, truth: Truth, retry: bool) -> Vec<StepResult> {
    let mut failing: Vec<&str> = object.faults.clone();
    if retry {
        failing.extend(&object.retry_faults);
    }
    for &(failed, later) in truth {
        if failing.contains(&failed) {
            failing.push(later);
        }
    }
    plan.operations()
        .iter()
        .map(|op| {
            if failing.contains(&op.name()) {
                StepResult::failed(ErrorClass::NotFound, format!("{} failed", op.name()))
            } else if object.idle.contains(&op.name()) {
                StepResult::idle()
            } else {
                StepResult::succeeded()
            }
        })
        .collect()
}

/// What one operation's two codes wrote for one object (the control's writes, the candidate's),
/// as the engine's write logs hold them: `None` when they are not compared.
pub type WorldWrites<'w> = &'w dyn Fn(
    usize,
    &shadow_reconciler::plan::Operation,
) -> Option<(
    Vec<shadow_reconciler::engine::writes::Write>,
    Vec<shadow_reconciler::engine::writes::Write>,
)>;

/// Records every shadow reconcile of `objects` (kind `Widget`, over 5 namespaces, interleaved in
/// time) under `plan` into `dir` with the real Parquet sink; no record is dropped.
pub fn record_world(
    dir: &std::path::Path,
    plan: &Arc<ReconcilePlan>,
    objects: &[Object],
    truth: Truth,
) {
    record_world_with_writes(dir, plan, objects, truth, &|_, _| None);
}

/// [`record_world`], and for every operation the control ran, what `writes` says the two codes
/// of the `i`-th object wrote, compared as the engine compares them (under `plan`'s
/// declarations and volatile fields).
pub fn record_world_with_writes(
    dir: &std::path::Path,
    plan: &Arc<ReconcilePlan>,
    objects: &[Object],
    truth: Truth,
    writes: WorldWrites<'_>,
) {
    record_world_in(
        dir,
        plan,
        (objects, truth),
        writes,
        shadow_reconciler::vocab::Mode::Shadow,
    );
}

/// [`record_world_with_writes`] in `mode`: `shadow`, or `calibrate` (the control alone, and the
/// differences `writes` gives are the control's code against itself).
pub fn record_world_in(
    dir: &std::path::Path,
    plan: &Arc<ReconcilePlan>,
    (objects, truth): (&[Object], Truth),
    writes: WorldWrites<'_>,
    mode: shadow_reconciler::vocab::Mode,
) {
    use shadow_reconciler::dataset::{ParquetSink, SinkConfig};
    use shadow_reconciler::engine::{ObjectKey, Sink};
    let control = Policy::sequential(plan.clone());
    let candidate = Policy::phased_all_groups(plan.clone());
    let sink = ParquetSink::start(SinkConfig::new(dir), None);
    let start = std::time::SystemTime::UNIX_EPOCH + Duration::from_hours(500_000);
    let rounds = objects.iter().map(|o| o.reconciles).max().unwrap_or(0);
    let mut n = 0u64;
    for round in 0..rounds {
        for (i, object) in objects
            .iter()
            .enumerate()
            .filter(|(_, o)| round < o.reconciles)
        {
            n += 1;
            let mut record = shadow_reconciler::engine::record_of_world(
                &control,
                &candidate,
                ObjectKey {
                    kind: "Widget".into(),
                    namespace: Some(format!("ns-{}", i % 5)),
                    name: format!("w-{i:04}"),
                    uid: Some(format!("uid-{i}")),
                },
                start + Duration::from_millis(n),
                &world(plan, object, truth, round > 0),
                Some(format!("{n:032x}")),
            );
            if mode == shadow_reconciler::vocab::Mode::Calibrate {
                record.mode = mode;
                record.candidate.clear();
                record.unblocked.clear();
                record.newly_blocked.clear();
                record.changed.clear();
                record.candidate_error = None;
            }
            let kinds = shadow_reconciler::engine::writes::Kinds::default();
            for op in plan.operations() {
                let ran = record
                    .control_step(op.name())
                    .is_some_and(|s| s.execution == shadow_reconciler::vocab::Execution::Real);
                if let Some((control, candidate)) = writes(i, op).filter(|_| ran) {
                    record
                        .write_differences
                        .extend(shadow_reconciler::engine::writes::compare(
                            op,
                            (&control, &candidate),
                            plan.volatile(),
                            &kinds,
                        ));
                }
            }
            sink.record(&record);
        }
    }
    let stats = sink.shutdown(Duration::from_secs(30)).unwrap();
    assert_eq!((stats.dropped, stats.lost), (0, 0), "{stats:?}");
}
