//! The reconciles of a dataset as the rollout tests read them (`tests/suite/rollout.rs`, the Go
//! controller driven by its sidecar in `tests/system/go_controller.rs`).

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use shadow_reconciler::dataset::{Location, reader};

/// One HostedCluster reconcile of a dataset: what the rollout tests check each decision against.
pub struct Record {
    /// When it started, µs since the Unix epoch.
    pub time: i64,
    /// How long it took, µs.
    pub duration_us: i64,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub mode: String,
    pub groups: Vec<String>,
    pub flag_version: Option<String>,
}

/// The `HostedCluster` reconciles of the dataset at `dir` (whole parts; no orphan allowed).
pub fn records(dir: &std::path::Path) -> Vec<Record> {
    let parts = reader::parts_at(&Location::Local(dir.to_owned())).unwrap();
    assert!(parts.orphans.is_empty(), "{:?}", parts.orphans);
    let columns = [
        "time",
        "uid",
        "mode",
        "plan",
        "enforced_groups",
        "flag_version",
        "duration_us",
        "namespace",
        "name",
    ];
    let mut out = Vec::new();
    for (path, _) in &parts.pairs {
        for batch in reader::open(path, &columns).unwrap() {
            let batch = batch.unwrap();
            let column = |name: &str| batch.column_by_name(name).unwrap();
            let time = column("time").as_primitive::<TimestampMicrosecondType>();
            let duration = column("duration_us").as_primitive::<Int64Type>();
            let (namespace, name) = (
                column("namespace").as_string::<i32>(),
                column("name").as_string::<i32>(),
            );
            let (uid, mode, plan, version) = (
                column("uid").as_string::<i32>(),
                column("mode").as_string::<i32>(),
                column("plan").as_string::<i32>(),
                column("flag_version").as_string::<i32>(),
            );
            let groups = column("enforced_groups").as_list::<i32>();
            for i in (0..batch.num_rows()).filter(|&i| plan.value(i) == "hostedcluster") {
                let names = groups.value(i);
                out.push(Record {
                    time: time.value(i),
                    duration_us: duration.value(i),
                    namespace: namespace.value(i).to_owned(),
                    name: name.value(i).to_owned(),
                    uid: uid.value(i).to_owned(),
                    mode: mode.value(i).to_owned(),
                    groups: names
                        .as_string::<i32>()
                        .iter()
                        .flatten()
                        .map(str::to_owned)
                        .collect(),
                    flag_version: version.is_valid(i).then(|| version.value(i).to_owned()),
                });
            }
        }
    }
    out
}

/// The rollback rule, from the records: `group` was enforced (by some reconcile), never by an
/// object outside `ramp` percent, and never under a flag version in `after` (the rollback's and
/// every later one). Returns the reconciles that enforced it and how many started after
/// `decided_us`, the rollback's decision (each, then, under the flag before it).
pub fn check_rollback(
    records: &[Record],
    group: &str,
    ramp: f64,
    after: &std::collections::BTreeSet<&String>,
    decided_us: i64,
) -> (usize, usize) {
    let enforcing: Vec<&Record> = records
        .iter()
        .filter(|r| r.mode == "enforce" && r.groups.iter().any(|g| g == group))
        .collect();
    assert!(
        !enforcing.is_empty(),
        "{group} was enforced in its first step"
    );
    for r in &enforcing {
        assert!(
            f64::from(shadow_reconciler::flag::bucket(&r.uid)) < ramp * 100.0,
            "{} enforced {group} outside its {ramp}% ramp",
            r.uid
        );
        assert!(
            r.flag_version.as_ref().is_none_or(|v| !after.contains(v)),
            "{} enforced {group} under flag version {:?}, written at or after the rollback",
            r.uid,
            r.flag_version
        );
    }
    let late = enforcing.iter().filter(|r| r.time > decided_us).count();
    (enforcing.len(), late)
}
