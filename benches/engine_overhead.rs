//! The engine's own cost of the shadow: one HostedCluster reconcile through the engine in mode
//! `off` and in mode `shadow` on the happy path, with the Prometheus metrics and the Parquet sink
//! attached, against a client that answers instantly. Two reconcilers: `shared code` (the 20
//! operations both paths share, one code for both: the candidate reuses every control result) and
//! `candidate code` (the shipped reconciler: `SSHKeySync` paired and compared, the legacy-only
//! step's writes recorded, the phased-only check run by the candidate).
//!
//! The client replays responses: the object's API traffic is recorded once against the embedded
//! simulator (until a reconcile writes nothing new), then every measured reconcile is answered
//! from that recording by a lookup on (method, URI, body), in process: no simulator, no socket.
//! A request the recording lacks would fall through to the simulator; the bench counts those and
//! fails if any occurs while measuring, so what is measured is the engine, the reconciler's
//! client-side work and the sinks, nothing else.
//!
//! Two figures: criterion's wall time per reconcile on a single-threaded runtime (the Parquet
//! writer thread excluded), and the process CPU time per reconcile (every thread, the Parquet
//! writer's encoding included) over five interleaved pairs of off/shadow batches, whose median
//! ratio is printed. `docs/performance.md` records the results.
//!
//! A third figure, `candidate code` over a population: 200 HostedClusters (distinct UIDs), the
//! shadow engine's budget pairing code for `run`'s default paired sample (20% of the objects by
//! the stable hash of their UID; the others' reconciles run their control alone, counted
//! `sampled-out`), reconciled round-robin in the same interleaved CPU batches, with the extra API
//! requests per reconcile that the shadow sends (counted at the replaying client, off and shadow
//! apart).

#[path = "common/cpu.rs"]
mod cpu;

/// The binary's allocator (src/main.rs), so that the engine is measured as `run` runs it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::collections::HashMap;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use kube::api::Api;
use kube::client::Body;
use shadow_reconciler::dataset::{ParquetSink, SinkConfig};
use shadow_reconciler::engine::budget::{DEFAULT_PAIRED_SAMPLE, ShadowBudget};
use shadow_reconciler::engine::{Engine, OpContext, OpResult, Reconciler};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::reconcilers::hostedcluster::{
    self, HostedCluster, HostedClusterReconciler, State,
};
use shadow_reconciler::scenario::population;
use shadow_reconciler::sim::{SimConfig, Simulator};
use shadow_reconciler::telemetry::http::Telemetry;
use shadow_reconciler::vocab::Mode;
use shadow_reconciler::wiring::Wiring;

type Key = (String, String, Bytes);

/// Recorded responses, and how many requests missed the recording.
#[derive(Default)]
struct Replay {
    responses: Mutex<HashMap<Key, (http::StatusCode, Bytes)>>,
    misses: AtomicU64,
    /// Requests answered from the recording.
    served: AtomicU64,
    /// Until set, every request goes to the simulator and nothing is recorded.
    recording: std::sync::atomic::AtomicBool,
}

/// A kube client answering from `replay`, falling through to `upstream` (recording its answer).
fn replaying_client(replay: Arc<Replay>, upstream: kube::Client) -> kube::Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let (replay, upstream) = (replay.clone(), upstream.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await?;
            let key = (
                parts.method.to_string(),
                parts.uri.to_string(),
                body.clone(),
            );
            if !replay.recording.load(Ordering::Relaxed) {
                return upstream
                    .send(Request::from_parts(parts, Body::from(body)))
                    .await;
            }
            let known = replay.responses.lock().expect("replay").get(&key).cloned();
            let (status, bytes) = if let Some(found) = known {
                replay.served.fetch_add(1, Ordering::Relaxed);
                found
            } else {
                replay.misses.fetch_add(1, Ordering::Relaxed);
                let response = upstream
                    .send(Request::from_parts(parts, Body::from(body)))
                    .await?;
                let status = response.status();
                let bytes = response.into_body().collect_bytes().await?;
                replay
                    .responses
                    .lock()
                    .expect("replay")
                    .insert(key, (status, bytes.clone()));
                (status, bytes)
            };
            let response = Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from(bytes))
                .expect("response");
            Ok::<_, kube::Error>(response)
        }
    });
    kube::Client::new(service, "default")
}

/// The operations both code paths have (`hostedcluster::both_paths`), with one code for both.
struct SharedCode;

impl Reconciler for SharedCode {
    type Object = HostedCluster;
    type State = State;

    fn operations(&self) -> &'static [&'static str] {
        hostedcluster::both_paths()
    }

    fn run<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<HostedCluster, State>,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        HostedClusterReconciler.run(op, ctx)
    }
}

/// What a measured reconciler brings: itself and its plan.
trait Measured: Reconciler<Object = HostedCluster> + Sized {
    const NAME: &'static str;
    fn make() -> (Self, Arc<ReconcilePlan>);
}

impl Measured for SharedCode {
    const NAME: &'static str = "shared code";
    fn make() -> (Self, Arc<ReconcilePlan>) {
        let plan = ReconcilePlan::from_yaml(
            "benches/common/hostedcluster-shared-code.yaml",
            include_str!("common/hostedcluster-shared-code.yaml"),
        )
        .expect("the bench's plan");
        (Self, Arc::new(plan))
    }
}

impl Measured for HostedClusterReconciler {
    const NAME: &'static str = "candidate code";
    fn make() -> (Self, Arc<ReconcilePlan>) {
        (Self, Self::plan())
    }
}

/// One engine of the reconciler in `mode`, with metrics and the Parquet sink; the shadow's budget
/// unlimited in rate and sampling `sample` of the objects for paired code.
fn engine<R: Measured>(
    mode: Mode,
    client: &kube::Client,
    (telemetry, parquet): (&Telemetry, &Arc<ParquetSink>),
    sample: shadow_reconciler::flag::Ramp,
) -> Engine<R> {
    let (reconciler, plan) = R::make();
    let flag = FlagSpec {
        mode,
        ..FlagSpec::default()
    };
    let flag = Arc::new(LiveFlag::new(flag, vec![plan.clone()]).expect("flag"));
    Wiring::new(client.clone(), flag)
        .with_shadow_budget(Arc::new(
            ShadowBudget::unlimited().with_paired_sample(sample),
        ))
        .with_metrics(telemetry.metrics().clone())
        .with_parquet(Some(parquet.clone()))
        .engine(reconciler, plan)
        .expect("engine")
}

struct Setup<R: Reconciler> {
    _sim: Simulator,
    replay: Arc<Replay>,
    off: Engine<R>,
    shadow: Engine<R>,
    objects: Vec<Arc<HostedCluster>>,
    parquet: Arc<ParquetSink>,
    _dir: tempfile::TempDir,
}

/// `n` healthy HostedClusters in the simulator, reconciled in both modes until a round changes
/// nothing in the simulator (every condition written, every child object applied); then one
/// reconcile of each in each mode is recorded. The shadow engine pairs code for `sample` of them.
async fn setup<R: Measured>(n: usize, sample: shadow_reconciler::flag::Ramp) -> Setup<R> {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("simulator");
    let mut config = kube::Config::new(sim.url().parse().expect("url"));
    config.default_retry = false;
    let upstream = kube::Client::try_from(config).expect("client");
    population::create_crds(&upstream).await.expect("CRDs");
    let mut rng = shadow_reconciler::util::Rng::new(1);
    population::create(&upstream, population::Faults::NONE, n, 0, &mut rng)
        .await
        .expect("population");
    let replay = Arc::new(Replay::default());
    let client = replaying_client(replay.clone(), upstream.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let parquet = Arc::new(ParquetSink::start(SinkConfig::new(dir.path()), None));
    let telemetry = Telemetry::new();
    let sinks = (&telemetry, &parquet);
    let off = engine::<R>(Mode::Off, &client, sinks, sample);
    let shadow = engine::<R>(Mode::Shadow, &client, sinks, sample);
    let hcs: Api<HostedCluster> = Api::all(upstream);
    let fresh = || async {
        hcs.list(&kube::api::ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .map(Arc::new)
            .collect::<Vec<_>>()
    };
    // Each reconcile on the object as it is now, until a round changes nothing.
    let mut steady = false;
    for _ in 0..10 {
        let before = sim.store(|s| s.resource_version());
        for engine in [&off, &shadow] {
            for object in fresh().await {
                engine.reconcile(object).await;
            }
        }
        if sim.store(|s| s.resource_version()) == before {
            steady = true;
            break;
        }
    }
    assert!(
        steady,
        "the reconciles kept changing the object after 10 rounds"
    );
    let objects = fresh().await;
    assert_eq!(objects.len(), n);
    replay.recording.store(true, Ordering::Relaxed);
    for engine in [&off, &shadow] {
        for object in &objects {
            let outcome = engine.reconcile(object.clone()).await;
            assert!(
                outcome.error.is_none(),
                "the happy path failed: {:?}",
                outcome.error
            );
        }
    }
    Setup {
        _sim: sim,
        replay,
        off,
        shadow,
        objects,
        parquet,
        _dir: dir,
    }
}

fn overhead(c: &mut Criterion) {
    measure::<SharedCode>(c);
    measure::<HostedClusterReconciler>(c);
    population();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// One object: criterion's wall time per reconcile, then the CPU pairs.
fn measure<R: Measured>(c: &mut Criterion) {
    let runtime = runtime();
    let setup = runtime.block_on(setup::<R>(1, shadow_reconciler::flag::Ramp::ALL));
    let misses = setup.replay.misses.load(Ordering::Relaxed);
    let mut group = c.benchmark_group(format!("engine reconcile, instant client, {}", R::NAME));
    for (name, engine) in [("off", &setup.off), ("shadow", &setup.shadow)] {
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(engine.reconcile(black_box(setup.objects[0].clone()))));
        });
    }
    group.finish();
    cpu_pairs(&runtime, &setup, R::NAME);
    check_misses(&setup, misses);
}

/// The shipped reconciler over a population (200 objects; 20 in test mode) at `run`'s default
/// paired sample.
fn population() {
    let objects = if std::env::args().any(|a| a == "--bench") {
        200
    } else {
        20
    };
    let runtime = runtime();
    let setup = runtime.block_on(setup::<HostedClusterReconciler>(
        objects,
        DEFAULT_PAIRED_SAMPLE,
    ));
    let sampled = setup
        .objects
        .iter()
        .filter(|o| {
            let uid = o.metadata.uid.as_deref().expect("a UID");
            DEFAULT_PAIRED_SAMPLE.includes(shadow_reconciler::flag::sample_bucket(uid))
        })
        .count();
    let name = format!(
        "candidate code, {objects} objects, {sampled} in the {}% paired sample",
        DEFAULT_PAIRED_SAMPLE.percent()
    );
    let misses = setup.replay.misses.load(Ordering::Relaxed);
    cpu_pairs(&runtime, &setup, &name);
    check_misses(&setup, misses);
}

fn check_misses<R: Reconciler>(setup: &Setup<R>, misses: u64) {
    let after = setup.replay.misses.load(Ordering::Relaxed);
    assert_eq!(
        after,
        misses,
        "{} requests were not in the recording: the measured reconciles were not all served instantly",
        after - misses
    );
}

/// CPU per reconcile, every thread counted (the Parquet writer's included): interleaved pairs
/// of off/shadow batches over the setup's objects round-robin; the API requests per reconcile
/// of each mode too.
#[allow(clippy::cast_precision_loss)] // request counts far below 2^52
fn cpu_pairs<R: Reconciler<Object = HostedCluster>>(
    runtime: &tokio::runtime::Runtime,
    setup: &Setup<R>,
    name: &str,
) {
    let full = std::env::args().any(|a| a == "--bench");
    let batch: u32 = if full { 20_000 } else { 50 };
    let mut ratios = Vec::new();
    for _ in 0..if full { 5 } else { 1 } {
        let mut per = [Duration::ZERO; 2];
        let mut requests = [0.0; 2];
        for (i, engine) in [&setup.off, &setup.shadow].into_iter().enumerate() {
            let served = setup.replay.served.load(Ordering::Relaxed);
            let before = cpu::process_cpu();
            runtime.block_on(async {
                for object in setup.objects.iter().cycle().take(batch as usize) {
                    engine.reconcile(object.clone()).await;
                }
            });
            // The Parquet writer's share: wait until it has written what it was given.
            assert!(
                setup.parquet.flush(Duration::from_mins(1)),
                "the Parquet writer did not catch up within a minute"
            );
            per[i] = cpu::process_cpu().saturating_sub(before) / batch;
            requests[i] =
                (setup.replay.served.load(Ordering::Relaxed) - served) as f64 / f64::from(batch);
        }
        println!(
            "{name}: cpu per reconcile: off {:.1} us, shadow {:.1} us, shadow/off {:.3}; API requests per reconcile: off {:.2}, shadow {:.2}",
            per[0].as_secs_f64() * 1e6,
            per[1].as_secs_f64() * 1e6,
            per[1].as_secs_f64() / per[0].as_secs_f64(),
            requests[0],
            requests[1],
        );
        ratios.push(per[1].as_secs_f64() / per[0].as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{name}: shadow/off CPU per reconcile, median of {}: {:.3}",
        ratios.len(),
        ratios[ratios.len() / 2]
    );
}

criterion_group!(benches, overhead);
criterion_main!(benches);
