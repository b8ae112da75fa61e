//! Differential conformance: one table of API scenarios played by the same code against the
//! embedded simulator and against a real kube-apiserver, the answers normalised and compared field
//! by field. Every scenario is played a second time with `dryRun=All` on each of its writes.
//!
//! Every difference must be listed in [`KNOWN`] (and, by its id, in docs/simulator.md); a listed
//! difference that no longer occurs fails the test too, so the list stays exactly the truth.

mod common;

#[path = "conformance/runner.rs"]
mod runner;
#[path = "conformance/scenarios.rs"]
mod scenarios;

use std::fmt::Write as _;

use common::apiserver::{ADMIN_USER_AGENT, ControlPlane};
use runner::{Difference, Scenario, StepKind, compare, normalise, play};
use shadow_reconciler::sim::{SimConfig, Simulator};

/// A class of difference between the simulator and kube-apiserver, kept on purpose (or not yet
/// fixed). `scenario`, `step` and `path` are matched as prefixes; `*` in `path` matches any run of
/// characters.
struct Known {
    id: &'static str,
    scenario: &'static str,
    step: &'static str,
    path: &'static str,
}

const fn known(
    id: &'static str,
    scenario: &'static str,
    step: &'static str,
    path: &'static str,
) -> Known {
    Known {
        id,
        scenario,
        step,
        path,
    }
}

/// The differences left, each documented in docs/simulator.md under its id.
const KNOWN: &[Known] = &[
    // Field ownership: no managedFields, and apply merges without owners or conflicts.
    known("managed-fields", "", "", "*metadata.managedFields"),
    known(
        "apply-ownership",
        "apply",
        "apply by another manager, conflicting",
        "",
    ),
    known(
        "apply-ownership",
        "apply",
        "apply dropping an owned field",
        "",
    ),
    known("apply-ownership", "apply", "get", ""),
    // Strategic merge patch is applied as a merge patch: lists are replaced, never merged by key.
    known(
        "strategic-merge-lists",
        "patch",
        "strategic merge patch of a list",
        "",
    ),
    // Foreground and orphan deletion: no garbage collector, the object goes at once.
    known("gc-propagation", "delete", "delete in the foreground", ""),
    known("gc-propagation", "delete", "get after foreground", ""),
    known("gc-propagation", "delete", "delete orphaning", ""),
    known("gc-propagation", "delete", "get after orphan", ""),
    known("gc-propagation", "delete", "list after", ""),
    // Namespace deletion: immediate, with its contents, instead of `Terminating`.
    known("namespace-lifecycle", "namespaces", "delete", ""),
    known("namespace-lifecycle", "namespaces", "get after delete", ""),
    known(
        "namespace-lifecycle",
        "namespaces",
        "create in a terminating namespace",
        "",
    ),
    known(
        "namespace-lifecycle",
        "namespaces",
        "get inside after delete",
        "",
    ),
    // A CRD is established in the answer to its create, not moments later.
    known("crd-established-at-once", "crd", "create", "status."),
    known(
        "crd-established-at-once",
        "crd",
        "established",
        "metadata.resourceVersion",
    ),
    // A path that names no resource: a `Status`, where the real server answers plain text.
    known(
        "unknown-path-body",
        "crd",
        "create a resource of a missing kind",
        "",
    ),
    // 410 from a watch: the watch cache's words, also where the real server asked etcd.
    known(
        "watch-expired-message",
        "watch",
        "watch from a compacted",
        "[0].object.message",
    ),
];

fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return text.starts_with(pattern);
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if let Some(at) = rest.find(part) {
            rest = &rest[at + part.len()..];
        } else {
            return false;
        }
    }
    true
}

fn classify(d: &Difference) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|k| {
            d.scenario.starts_with(k.scenario)
                && d.step.starts_with(k.step)
                && glob(k.path, &d.path)
        })
        .map(|k| k.id)
}

fn show(v: Option<&serde_json::Value>) -> String {
    v.map_or_else(
        || "(absent)".to_owned(),
        |v| {
            let s = v.to_string();
            if s.len() > 400 {
                format!("{}...", &s[..397])
            } else {
                s
            }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_answers_as_kube_apiserver_does() {
    let plane = ControlPlane::start();
    let real = plane.client(ADMIN_USER_AGENT).await;
    let mut sim = Simulator::start(SimConfig::default())
        .await
        .expect("simulator");
    let sim_client = common::client_for(&sim, |_| {});
    let compact_sim = || sim.store(shadow_reconciler::sim::Store::compact);
    let compact_real = || plane.compact_etcd();

    let mut scenarios = scenarios::all();
    let dry: Vec<Scenario> = scenarios
        .iter()
        .filter_map(Scenario::dry_run_variant)
        .collect();
    scenarios.extend(dry);

    let mut all = Vec::new();
    let mut fields = 0;
    let mut steps = 0;
    for scenario in &scenarios {
        let namespace = format!("c-{}", scenario.name);
        let mut s = play(&sim_client, scenario, &namespace, &compact_sim).await;
        let mut r = play(&real, scenario, &namespace, &compact_real).await;
        normalise(&mut s);
        normalise(&mut r);
        let (differences, compared) = compare(&scenario.name, &s, &r);
        fields += compared;
        steps += scenario
            .steps
            .iter()
            .filter(|s| s.compared && !matches!(s.kind, StepKind::Compact))
            .count();
        all.extend(differences);
    }

    let mut report = String::new();
    let mut unexplained = 0;
    let mut by_class: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for d in &all {
        let class = classify(d);
        match class {
            Some(id) => *by_class.entry(id).or_default() += 1,
            None => unexplained += 1,
        }
        let _ = writeln!(
            report,
            "  [{}] {} / {} / {}: simulator {} | kube-apiserver {}",
            class.unwrap_or("UNLISTED"),
            d.scenario,
            d.step,
            d.path,
            show(d.simulator.as_ref()),
            show(d.real.as_ref())
        );
    }
    eprintln!(
        "conformance: {} scenarios ({} with dryRun=All), {steps} compared steps, {fields} fields compared, {} differences ({} listed in {} classes, {unexplained} unlisted)",
        scenarios.len(),
        scenarios
            .iter()
            .filter(|s| s.name.ends_with("-dry-run"))
            .count(),
        all.len(),
        all.len() - unexplained,
        by_class.len()
    );
    eprint!("{report}");
    let unused: Vec<&str> = KNOWN
        .iter()
        .map(|k| k.id)
        .filter(|id| !by_class.contains_key(id))
        .collect();
    assert_eq!(
        unexplained, 0,
        "differences not listed in KNOWN (see above)"
    );
    assert!(
        unused.is_empty(),
        "listed differences that no longer occur (fixed? then remove them from KNOWN and docs/simulator.md): {unused:?}"
    );
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/simulator.md"))
        .expect("docs/simulator.md");
    let undocumented: Vec<&str> = KNOWN
        .iter()
        .map(|k| k.id)
        .filter(|id| !docs.contains(&format!("`{id}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "differences not documented in docs/simulator.md: {undocumented:?}"
    );
    sim.shutdown().await.ok();
}
