//! Cost of the models and the diff on the hostedcluster plan with random outcomes.
//!
//! Throughput is per operation (20 per reconcile), so criterion's "thrpt" reads as operations per
//! second; `docs/performance.md` records the results.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use shadow_reconciler::model::montecarlo::{draw_world, drive_candidate};
use shadow_reconciler::model::{Diff, Policy, drive};
use shadow_reconciler::plan::embedded;
use shadow_reconciler::util::Rng;

fn models(c: &mut Criterion) {
    let plan = Arc::new(embedded::load("hostedcluster").expect("shipped plan"));
    let sequential = Policy::sequential(plan.clone());
    let phased = Policy::phased_all_groups(plan.clone());
    let ops = plan.len() as u64;

    for failure_rate in [0.0, 0.05, 0.3] {
        let mut rng = Rng::new(42);
        let worlds: Vec<_> = (0..1024)
            .map(|_| draw_world(&plan, failure_rate, &mut rng))
            .collect();
        let mut group = c.benchmark_group(format!("hostedcluster/failure-rate-{failure_rate}"));
        group.throughput(Throughput::Elements(ops));
        let mut i = 0;
        group.bench_function("sequential", |b| {
            b.iter(|| {
                i = (i + 1) % worlds.len();
                let world = &worlds[i];
                black_box(drive(&sequential, |op| world[op.id().index()].clone()))
            });
        });
        group.bench_function("phased", |b| {
            b.iter(|| {
                i = (i + 1) % worlds.len();
                let world = &worlds[i];
                black_box(drive(&phased, |op| world[op.id().index()].clone()))
            });
        });
        group.bench_function("control+candidate+diff", |b| {
            b.iter(|| {
                i = (i + 1) % worlds.len();
                let world = &worlds[i];
                let control = drive(&sequential, |op| world[op.id().index()].clone());
                let candidate = drive_candidate(&phased, &control, world);
                black_box(Diff::between(&control, &candidate).expect("same plan"))
            });
        });
        group.finish();
    }
}

criterion_group!(benches, models);
criterion_main!(benches);
