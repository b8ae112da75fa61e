//! Differential conformance: one table of API scenarios played by the same code against the
//! embedded simulator and against a real kube-apiserver, the answers normalised and compared field
//! by field. Every scenario is played a second time with `dryRun=All` on each of its writes.
//!
//! Every difference must be listed in [`KNOWN`] (and, by its id, in docs/simulator.md); a listed
//! difference that no longer occurs fails the test too, so the list stays exactly the truth.

use crate::common;

#[path = "conformance/runner.rs"]
mod runner;
#[path = "conformance/scenarios.rs"]
mod scenarios;

use std::fmt::Write as _;

use common::apiserver::{ADMIN_USER_AGENT, ControlPlane};
use runner::{Difference, Scenario, StepKind, compare, normalise, play};
use shadow_reconciler::sim::{SimConfig, Simulator};

/// A difference between the simulator and kube-apiserver, kept on purpose (or not yet fixed):
/// the steps (by exact scenario name and step label) and the fields (`path`, where `*` matches any
/// run of characters, so `*` alone is every field, the status code included) it covers. Every
/// entry must match at least one difference, so none outlives what it describes.
struct Known {
    id: &'static str,
    scenarios: &'static [&'static str],
    step: &'static str,
    path: &'static str,
}

const fn known(
    id: &'static str,
    scenarios: &'static [&'static str],
    step: &'static str,
    path: &'static str,
) -> Known {
    Known {
        id,
        scenarios,
        step,
        path,
    }
}

/// Every scenario: for differences of a field that occurs anywhere.
const ANY: &[&str] = &[];

/// The differences left, each documented in docs/simulator.md under its id.
const KNOWN: &[Known] = &[
    // Field ownership: no managedFields, and apply merges without owners or conflicts.
    known("managed-fields", ANY, "", "*metadata.managedFields"),
    known(
        "apply-ownership",
        &["apply"],
        "apply by another manager, conflicting",
        "*",
    ),
    known(
        "apply-ownership",
        &["apply"],
        "apply dropping an owned field",
        "data.b",
    ),
    known(
        "apply-ownership",
        &["apply"],
        "apply dropping an owned field",
        "metadata.resourceVersion",
    ),
    known("apply-ownership", &["apply"], "get", "data.b"),
    known(
        "apply-ownership",
        &["apply"],
        "get",
        "metadata.resourceVersion",
    ),
    // Strategic merge patch is applied as a merge patch: lists are replaced, never merged by key.
    known(
        "strategic-merge-lists",
        &["patch"],
        "strategic merge patch of a list with a merge key",
        "secrets[1].name",
    ),
    // Foreground and orphan deletion: no garbage collector, the object goes at once.
    known(
        "gc-propagation",
        &["delete", "delete-dry-run"],
        "delete in the foreground",
        "*",
    ),
    known(
        "gc-propagation",
        &["delete", "delete-dry-run"],
        "delete orphaning",
        "*",
    ),
    known("gc-propagation", &["delete"], "get after foreground", "*"),
    known("gc-propagation", &["delete"], "get after orphan", "*"),
    known("gc-propagation", &["delete"], "list after", "items*"),
    // Namespace deletion: immediate, with its contents, instead of `Terminating`.
    known("namespace-lifecycle", &["namespaces"], "delete", "*"),
    known(
        "namespace-lifecycle",
        &["namespaces"],
        "get after delete",
        "*",
    ),
    known(
        "namespace-lifecycle",
        &["namespaces"],
        "create in a terminating namespace",
        "*",
    ),
    known(
        "namespace-lifecycle",
        &["namespaces"],
        "get inside after delete",
        "*",
    ),
    // A CRD is established in the answer to its create, not moments later (one more version
    // of the CRD on the real server, which every later version of it counts).
    known(
        "crd-established-at-once",
        &["crd", "crd-dry-run"],
        "create",
        "status.*",
    ),
    known(
        "crd-established-at-once",
        &["crd"],
        "established",
        "metadata.resourceVersion",
    ),
    known(
        "crd-established-at-once",
        &["crd"],
        "delete the CRD",
        "metadata.resourceVersion",
    ),
    // A path that names no resource: a `Status`, where the real server answers plain text.
    known(
        "unknown-path-body",
        &["crd", "crd-dry-run"],
        "create a resource of a missing kind",
        "*",
    ),
    known(
        "unknown-path-body",
        &["crd-dry-run"],
        "create a resource",
        "*",
    ),
    known("unknown-path-body", &["crd-dry-run"], "list resources", "*"),
    // 410 from a watch: the watch cache's words, also where the real server asked etcd.
    known(
        "watch-expired-message",
        &["watch"],
        "watch from a compacted resourceVersion",
        "[0].object.message",
    ),
];

/// Whether `text` matches `pattern` as a whole; `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.is_char_boundary(head.len() + i) && glob(tail, &text[head.len() + i..])
                })
        }
    }
}

/// The entry of [`KNOWN`] that covers `d`.
fn classify(d: &Difference) -> Option<usize> {
    KNOWN.iter().position(|k| {
        (k.scenarios.is_empty() || k.scenarios.contains(&d.scenario.as_str()))
            && (k.step.is_empty() || k.step == d.step)
            && glob(k.path, &d.path)
    })
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
    let mut hits = vec![0usize; KNOWN.len()];
    for d in &all {
        let entry = classify(d);
        match entry {
            Some(i) => hits[i] += 1,
            None => unexplained += 1,
        }
        let _ = writeln!(
            report,
            "  [{}] {} / {} / {}: simulator {} | kube-apiserver {}",
            entry.map_or("UNLISTED", |i| KNOWN[i].id),
            d.scenario,
            d.step,
            d.path,
            show(d.simulator.as_ref()),
            show(d.real.as_ref())
        );
    }
    let mut by_id: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (k, n) in KNOWN.iter().zip(&hits) {
        *by_id.entry(k.id).or_default() += n;
    }
    eprintln!(
        "conformance: {} scenarios ({} with dryRun=All), {steps} compared steps, {fields} fields compared, {} differences ({} listed, {unexplained} unlisted); by id: {by_id:?}",
        scenarios.len(),
        scenarios
            .iter()
            .filter(|s| s.name.ends_with("-dry-run"))
            .count(),
        all.len(),
        all.len() - unexplained,
    );
    eprint!("{report}");
    let unused: Vec<String> = KNOWN
        .iter()
        .zip(&hits)
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| format!("{} ({:?} / {:?} / {:?})", k.id, k.scenarios, k.step, k.path))
        .collect();
    assert_eq!(
        unexplained, 0,
        "differences not listed in KNOWN (see above)"
    );
    assert!(
        unused.is_empty(),
        "entries of KNOWN that match no difference (fixed? then remove them, and from docs/simulator.md when the id goes): {unused:?}"
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
