//! The legacy loop as one function (the HyperShift shape: `reconcileLegacy` kept beside the
//! phased reconcile): the function marks its steps, the engine runs the candidate's phased code of
//! each marked operation in dry-run right there, attributes the function's writes and its error to
//! the step it is in, and replays the sequential model over the marks. On the simulator.

use crate::common;

use std::sync::Arc;

use common::hostedcluster::{self as fixture, NS};
use common::start_sim;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use shadow_reconciler::engine::{
    Engine, LegacyLoop, LegacyLoopFn, MemorySink, OpContext, OpError, OpOutput, OpResult,
    ReconcileRecord, Reconciler,
};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;
use shadow_reconciler::sim::{SimConfig, Simulator};
use shadow_reconciler::vocab::{ErrorClass, Execution, Mode, WriteVerb};

/// Two operations in both paths, the legacy loop's own inline step, and a check the phased
/// reconcile added.
const PLAN: &str = "\
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: loop
spec:
  operations:
    - name: Config
      phase: 1
      category: critical
      shadow: dry-run
    - name: Extra
      phase: 2
      category: non-critical
      shadow: dry-run
    - name: Check
      phase: 3
      category: critical
      shadow: dry-run
      only: phased
    - name: Inline
      only: legacy
  legacy:
    order: [Config, Inline, Extra]
";

/// How the legacy loop behaves in a test.
#[derive(Clone, Copy, Debug)]
enum Loop {
    /// Marks every step and succeeds.
    Marks,
    /// Marks Config and fails in it.
    FailsInConfig,
    /// Marks nothing and fails.
    Opaque,
    /// Marks a step the plan does not have, then goes on as `Marks`.
    UnknownMark,
    /// As `Marks`, but Config also writes a value drawn anew each run.
    Noisy,
}

/// Values drawn by `Loop::Noisy`, and how often the loop got past its `Inline` mark.
static DRAWS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static PAST_INLINE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

struct LoopReconciler(Loop);

const OPERATIONS: &[&str] = &["Config", "Extra", "Check", "Inline"];

fn cp(hc: &HostedCluster) -> String {
    format!(
        "{}-{}",
        hc.metadata.namespace.as_deref().unwrap_or_default(),
        hc.metadata.name.as_deref().unwrap_or_default()
    )
}

async fn config(client: &kube::Client, ns: &str, data: &[(&str, &str)]) -> Result<(), OpError> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("config".into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            "config",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(&cm),
        )
        .await
        .map(|_| ())
        .map_err(OpError::from)
}

impl Reconciler for LoopReconciler {
    type Object = HostedCluster;
    type State = ();

    fn operations(&self) -> &'static [&'static str] {
        OPERATIONS
    }

    /// The phased code: Config also writes `b`; Extra and Check do nothing.
    async fn run(&self, op: &str, ctx: &mut OpContext<HostedCluster, ()>) -> OpResult {
        if op == "Config" {
            config(&ctx.client(), &cp(ctx.object()), &[("a", "1"), ("b", "2")]).await?;
        }
        Ok(OpOutput::done())
    }

    fn legacy_loop(&self) -> Option<&dyn LegacyLoopFn<Self>> {
        Some(self)
    }
}

impl LegacyLoopFn<LoopReconciler> for LoopReconciler {
    fn call<'a>(&'a self, lp: &'a mut LegacyLoop<'_, Self>) -> BoxFuture<'a, OpResult> {
        Box::pin(self.reconcile_legacy(lp))
    }
}

impl LoopReconciler {
    /// The legacy loop function, as the controller keeps it.
    async fn reconcile_legacy(&self, lp: &mut LegacyLoop<'_, Self>) -> OpResult {
        let ns = cp(lp.object());
        match self.0 {
            Loop::Opaque => {
                return Err(OpError::new(ErrorClass::Server, "the legacy loop broke"));
            }
            Loop::UnknownMark => lp.step("NotInThePlan").await,
            Loop::Marks | Loop::FailsInConfig | Loop::Noisy => {}
        }
        lp.step("Config").await;
        if matches!(self.0, Loop::Noisy) {
            let stamp = DRAWS
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                .to_string();
            config(&lp.client(), &ns, &[("a", "1"), ("stamp", &stamp)]).await?;
        } else {
            config(&lp.client(), &ns, &[("a", "1")]).await?;
        }
        if matches!(self.0, Loop::FailsInConfig) {
            return Err(OpError::precondition("the legacy config is incomplete"));
        }
        lp.step("Inline").await;
        if matches!(self.0, Loop::Noisy) {
            PAST_INLINE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        lp.step("Extra").await;
        Ok(OpOutput::done())
    }
}

async fn reconcile(sim_client: &kube::Client, behaviour: Loop, mode: Mode) -> ReconcileRecord {
    let plan = Arc::new(ReconcilePlan::from_yaml("loop.yaml", PLAN).unwrap());
    let sink = MemorySink::new();
    let engine = Engine::new(
        Arc::new(LoopReconciler(behaviour)),
        plan.clone(),
        sim_client.clone(),
        Arc::new(
            LiveFlag::new(
                FlagSpec {
                    mode,
                    ..FlagSpec::default()
                },
                vec![plan],
            )
            .unwrap(),
        ),
    )
    .unwrap()
    .with_sink(Arc::new(sink.clone()));
    let hc = Api::<HostedCluster>::namespaced(sim_client.clone(), NS)
        .get("alpha")
        .await
        .unwrap();
    engine.reconcile(Arc::new(hc)).await;
    assert_eq!(engine.guard().refused(), 0);
    sink.records().pop().unwrap()
}

async fn world() -> (Simulator, kube::Client) {
    let (sim, client) = start_sim(SimConfig::default()).await;
    fixture::hosted_cluster(&client, "alpha", |_| {}).await;
    fixture::namespace(&client, "clusters-alpha").await;
    (sim, client)
}

fn outcome<'r>(
    steps: &'r [shadow_reconciler::engine::StepRecord],
    op: &str,
) -> (&'r str, Execution) {
    let s = steps
        .iter()
        .find(|s| s.operation == op)
        .unwrap_or_else(|| panic!("no step {op}"));
    (s.outcome, s.execution)
}

#[tokio::test]
async fn marks_pair_the_candidates_code_and_compare_what_each_wrote() {
    let (sim, client) = world().await;
    let record = reconcile(&client, Loop::Marks, Mode::Shadow).await;
    assert_eq!(record.control_error, None, "{record:#?}");
    for op in ["Config", "Inline", "Extra"] {
        assert_eq!(outcome(&record.control, op), ("succeeded", Execution::Real));
    }
    // The candidate ran its own code of every operation: none is reused.
    for op in ["Config", "Extra", "Check"] {
        assert_eq!(
            outcome(&record.candidate, op),
            ("succeeded", Execution::DryRun)
        );
    }
    let compared: Vec<_> = record
        .write_differences
        .iter()
        .map(|d| {
            (
                d.operation.as_str(),
                d.name.as_str(),
                d.control,
                d.candidate,
                d.fields.clone(),
            )
        })
        .collect();
    assert_eq!(
        compared,
        [(
            "Config",
            "config",
            Some(WriteVerb::Patch),
            Some(WriteVerb::Patch),
            vec!["data.b".to_owned()]
        )]
    );
    assert!(record.unblocked.is_empty(), "{:?}", record.unblocked);
    assert_eq!(
        sim.audit(|a| a.persisted_mutations(shadow_reconciler::engine::dryrun::USER_AGENT)),
        0
    );
    // The control's code wrote for real: `a`, never `b`.
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "clusters-alpha")
        .get("config")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap().keys().collect::<Vec<_>>(), ["a"]);
}

#[tokio::test]
async fn the_functions_error_fails_the_step_it_is_in() {
    let (_sim, client) = world().await;
    let record = reconcile(&client, Loop::FailsInConfig, Mode::Shadow).await;
    assert_eq!(
        outcome(&record.control, "Config"),
        ("failed", Execution::Real)
    );
    assert_eq!(outcome(&record.control, "Inline").0, "skipped");
    assert_eq!(outcome(&record.control, "Extra").0, "skipped");
    assert_eq!(record.control_first_failure.as_deref(), Some("Config"));
    assert_eq!(
        record.control_error.as_deref(),
        Some("the legacy config is incomplete")
    );
    // The candidate's code of Config succeeded where the legacy code failed; Extra, which the
    // legacy loop never reached, is unblocked.
    assert_eq!(
        outcome(&record.candidate, "Config"),
        ("succeeded", Execution::DryRun)
    );
    assert_eq!(record.changed, ["Config"]);
    assert_eq!(record.unblocked, ["Extra"]);
}

#[tokio::test]
async fn a_function_that_marks_nothing_and_fails_is_opaque() {
    let (_sim, client) = world().await;
    let record = reconcile(&client, Loop::Opaque, Mode::Shadow).await;
    assert_eq!(
        record.control_error.as_deref(),
        Some("the legacy loop broke")
    );
    assert!(
        record.control.iter().all(|s| s.outcome == "unknown"),
        "{:#?}",
        record.control
    );
    // Without marks there is nothing to pair: the candidate runs every step itself, after.
    assert!(
        record
            .candidate
            .iter()
            .all(|s| s.execution == Execution::DryRun),
        "{:#?}",
        record.candidate
    );
    assert!(record.write_differences.is_empty());
}

#[tokio::test]
async fn an_unknown_mark_is_ignored_and_off_pairs_nothing() {
    let (sim, client) = world().await;
    let record = reconcile(&client, Loop::UnknownMark, Mode::Shadow).await;
    assert_eq!(record.control_error, None, "{record:#?}");
    assert_eq!(record.write_differences.len(), 1);
    let before = sim.audit(shadow_reconciler::sim::Audit::len);
    let off = reconcile(&client, Loop::Marks, Mode::Off).await;
    assert!(off.candidate.is_empty() && off.write_differences.is_empty());
    let dry_runs = sim.audit(|a| {
        a.totals()
            .get(shadow_reconciler::engine::dryrun::USER_AGENT)
            .map_or(0, |t| t.dry_run_mutations)
    });
    assert!(sim.audit(shadow_reconciler::sim::Audit::len) > before);
    assert!(dry_runs > 0, "the shadow run dry-ran");
    assert_eq!(
        off.control
            .iter()
            .map(|s| s.operation.as_str())
            .collect::<Vec<_>>(),
        ["Config", "Inline", "Extra"],
        "the legacy path only"
    );
}

/// Mode calibrate: the legacy function is rehearsed in dry-run, then called for real, and its
/// writes compared step by step: a value drawn anew each run is the comparison's noise. The
/// rehearsal ends at the mark of a step a dry run cannot contain (here the legacy path's own
/// `Inline`, which the plan gives no shadow policy): the code past it ran once, for real.
#[tokio::test]
async fn calibration_rehearses_the_function_up_to_what_a_dry_run_cannot_contain() {
    let (sim, client) = world().await;
    let record = reconcile(&client, Loop::Noisy, Mode::Calibrate).await;
    assert_eq!(record.mode, Mode::Calibrate);
    assert_eq!(record.control_error, None, "{record:#?}");
    assert!(record.candidate.is_empty(), "no candidate runs");
    let found: Vec<_> = record
        .write_differences
        .iter()
        .map(|d| (d.operation.as_str(), d.name.as_str(), d.fields.clone()))
        .collect();
    assert_eq!(found, [("Config", "config", vec!["data.stamp".to_owned()])]);
    assert_eq!(
        (
            DRAWS.load(std::sync::atomic::Ordering::SeqCst),
            PAST_INLINE.load(std::sync::atomic::Ordering::SeqCst)
        ),
        (2, 1),
        "the rehearsal and the real call drew; only the real call went past Inline"
    );
    assert_eq!(
        sim.audit(|a| a.persisted_mutations(shadow_reconciler::engine::dryrun::USER_AGENT)),
        0
    );
}
