//! A reconcile cut short before it finished (its future dropped: a shutdown's grace expired, a
//! timeout around it) is recorded as cancelled: counted, with no step, no failure and no write
//! difference, through every sink that reads records (Parquet, then `analyze`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use shadow_reconciler::engine::{
    Engine, MemorySink, OpContext, OpError, OpOutput, OpResult, Reconciler,
};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedClusterSpec};
use shadow_reconciler::sim::SimConfig;
use shadow_reconciler::vocab::ErrorClass;

use crate::common::wait::wait_until_async;

/// Writes a ConfigMap, then waits on a write the server never answers (here: forever).
struct Stuck;

impl Reconciler for Stuck {
    type Object = HostedCluster;
    type State = ();

    fn operations(&self) -> &'static [&'static str] {
        &["Write", "Hang"]
    }

    async fn run(&self, op: &str, ctx: &mut OpContext<HostedCluster, ()>) -> OpResult {
        match op {
            "Write" => {
                let mut map = ConfigMap::default();
                map.metadata.name = Some("written".into());
                Api::<ConfigMap>::namespaced(ctx.client(), "clusters")
                    .create(&PostParams::default(), &map)
                    .await
                    .map(|_| OpOutput::done())
                    .or_else(|e| match OpError::from(e) {
                        error if error.class() == ErrorClass::AlreadyExists => Ok(OpOutput::done()),
                        error => Err(error),
                    })
            }
            "Hang" => std::future::pending().await,
            other => Err(OpError::internal(format!("no operation {other}"))),
        }
    }
}

#[tokio::test]
async fn a_reconcile_dropped_before_it_finished_is_recorded_as_cancelled() {
    let (_sim, client) = crate::common::start_sim(SimConfig::default()).await;
    shadow_reconciler::scenario::population::create_crds(&client)
        .await
        .unwrap();
    let mut ns = Namespace::default();
    ns.metadata.name = Some("clusters".into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let hc = Api::<HostedCluster>::namespaced(client.clone(), "clusters")
        .create(
            &PostParams::default(),
            &HostedCluster::new("alpha", HostedClusterSpec::default()),
        )
        .await
        .unwrap();
    let plan = Arc::new(
        ReconcilePlan::from_yaml(
            "stuck.yaml",
            "apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: stuck}
spec:
  operations:
    - {name: Write, phase: 1, category: critical, shadow: dry-run}
    - {name: Hang, phase: 2, category: non-critical, shadow: dry-run}
  legacy: {order: [Write, Hang]}
",
        )
        .unwrap(),
    );
    let flag = Arc::new(LiveFlag::new(FlagSpec::default(), vec![plan.clone()]).unwrap());
    let sink = MemorySink::new();
    let dir = tempfile::tempdir().unwrap();
    let parquet = shadow_reconciler::dataset::ParquetSink::start(
        shadow_reconciler::dataset::SinkConfig::new(dir.path()),
        None,
    );
    let parquet = Arc::new(parquet);
    let engine = Engine::new(Arc::new(Stuck), plan.clone(), client.clone(), flag)
        .unwrap()
        .with_sink(Arc::new(sink.clone()))
        .with_sink(parquet.clone());
    // The cut comes once the first operation has written for real: mid-reconcile, however
    // long the write takes. (The wait's bound is for a broken run only.)
    let configmaps = Api::<ConfigMap>::namespaced(client, "clusters");
    let written = wait_until_async(
        "the first operation's write",
        Duration::from_mins(5),
        Duration::from_millis(20),
        async || match configmaps.get_opt("written").await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    tokio::select! {
        outcome = engine.reconcile(Arc::new(hc)) => {
            panic!("the reconcile hangs until it is dropped; it ended: {outcome:?}")
        }
        waited = written => waited.expect("the first operation writes"),
    }
    let records = sink.records();
    assert_eq!(records.len(), 1, "{records:#?}");
    let record = &records[0];
    assert!(record.cancelled, "{record:#?}");
    assert!(
        record.control.is_empty()
            && record.candidate.is_empty()
            && record.control_error.is_none()
            && record.write_differences.is_empty(),
        "{record:#?}"
    );
    assert_eq!(record.object.name, "alpha");
    drop(engine);
    let parquet = Arc::try_unwrap(parquet).unwrap_or_else(|_| panic!("the sink is the test's"));
    let stats = parquet.shutdown(Duration::from_secs(30)).unwrap();
    assert_eq!((stats.dropped, stats.lost), (0, 0), "{stats:?}");
    let analysis = shadow_reconciler::analyze::analyze(
        dir.path(),
        std::slice::from_ref(plan.as_ref()),
        &shadow_reconciler::analyze::Settings::default(),
    );
    let report = &analysis.expect("the plan's rows are analysable").plans[0];
    assert_eq!((report.reconciles, report.cancelled), (0, 1), "{report:#?}");
    assert!(
        report
            .operations
            .iter()
            .all(|o| o.failures == 0 && o.executions == 0)
    );
}
