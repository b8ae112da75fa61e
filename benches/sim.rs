//! Throughput of the embedded API simulator for get and patch over loopback, driven by kube-rs
//! clients with 8 requests in flight. Criterion's "thrpt" reads as requests per second;
//! `docs/performance.md` records the results.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use shadow_reconciler::sim::{SimConfig, Simulator};

const OBJECTS: u64 = 100;
const IN_FLIGHT: u64 = 8;

/// Runs `iters` requests, `IN_FLIGHT` at a time, and returns the elapsed time.
async fn run<F, Fut>(iters: u64, request: F) -> Duration
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let request = Arc::new(request);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (request, next) = (request.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= iters {
                        break;
                    }
                    request(i).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    started.elapsed()
}

fn simulator(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (_sim, api) = runtime.block_on(async {
        let sim = Simulator::start(SimConfig::default())
            .await
            .expect("simulator");
        let mut config = kube::Config::new(sim.url().parse().expect("url"));
        config.default_retry = false;
        let api: Api<ConfigMap> =
            Api::namespaced(kube::Client::try_from(config).expect("client"), "default");
        for i in 0..OBJECTS {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("cm-{i}")),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create");
        }
        (sim, api)
    });
    let mut group = c.benchmark_group("simulator");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    let get_api = api.clone();
    group.bench_function("get", |b| {
        b.iter_custom(|iters| {
            let api = get_api.clone();
            runtime.block_on(run(iters, move |i| {
                let api = api.clone();
                async move {
                    api.get(&format!("cm-{}", i % OBJECTS)).await.expect("get");
                }
            }))
        });
    });
    let counter = Arc::new(AtomicU64::new(0));
    group.bench_function("patch", |b| {
        b.iter_custom(|iters| {
            let (api, counter) = (api.clone(), counter.clone());
            runtime.block_on(run(iters, move |i| {
                let api = api.clone();
                let n = counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    let patch = serde_json::json!({"data": {"n": n.to_string()}});
                    api.patch(
                        &format!("cm-{}", i % OBJECTS),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .expect("patch");
                }
            }))
        });
    });
    group.finish();
}

criterion_group!(benches, simulator);
criterion_main!(benches);
